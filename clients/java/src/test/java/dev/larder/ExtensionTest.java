package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The JUnit 5 extension, end to end: the JUnit console launcher runs the sample test classes
 * (dev.larder.sample.SampleGalleryTest, one pass and one deliberate failure; dev.larder.sample.one and
 * .two.SameNameTest, the labels) in a subprocess against a real server; the failed test's store must be
 * kept with its artifact saved, the passed test's store deleted, every store labelled RUN/PACKAGE/TEST
 * with the run prefix of -Dlarder.run, LARDER_RUN or the CI system's variables, and a run's kept stores
 * removed by DELETE /stores?label_prefix=RUN/.
 */
class ExtensionTest {
    static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    @Test
    void failedTestKeepsItsStoreAndSavesTheArtifactPassedTestDeletesIt(@TempDir Path work) throws Exception {
        Path artifacts = work.resolve("artifacts");
        Path ids = Files.createDirectories(work.resolve("ids"));
        Path output = work.resolve("launcher.out");
        List<String> cmd = SampleRun.command(List.of(), SampleRun.client() + File.pathSeparator + SampleRun.samples(),
                "dev.larder.sample.SampleGalleryTest");
        Map<String, String> env = new HashMap<>();
        env.put("LARDER_URL", server.url);
        env.put("LARDER_ARTIFACTS", artifacts.toString());
        env.put("LARDER_SAMPLE_IDS", ids.toString());
        env.put("GITHUB_RUN_ID", "123"); // without GITHUB_ACTIONS: not a run prefix
        Process p = SampleRun.start(cmd, work, env, output);
        SampleRun.finish(p, 60, output);
        String out = Files.readString(output);
        assertEquals(1, p.exitValue(), "the launcher exits 1 when a test failed:\n" + out);
        assertTrue(out.contains("1 tests successful"), out);
        assertTrue(out.contains("1 tests failed"), out);
        assertTrue(out.contains("this test fails on purpose"), out);

        String failedId = Files.readString(ids.resolve("failsOnPurpose.id")).strip();
        String passedId = Files.readString(ids.resolve("passes.id")).strip();
        Larder larder = new Larder(server.url);

        // The failed test's store is kept ...
        Store kept = larder.store(failedId);
        assertEquals(true, kept.info().keep());
        // No run prefix: PACKAGE/TEST.
        assertEquals("dev.larder.sample.SampleGalleryTest/failsOnPurpose", kept.info().label());
        assertEquals("dev.larder.sample.SampleGalleryTest/passes", Files.readString(ids.resolve("passes.label")));
        // ... and its artifact is in LARDER_ARTIFACTS, named after the test, holding store.sqlite.
        Path zip = artifacts.resolve("SampleGalleryTest.failsOnPurpose-" + failedId + ".zip");
        assertTrue(Files.isRegularFile(zip), "no artifact at " + zip + "; output:\n" + out);
        assertTrue(out.contains(zip.toString()), "the artifact path is reported:\n" + out);
        Path unzipped = work.resolve("unzipped.sqlite");
        try (ZipFile z = new ZipFile(zip.toFile())) {
            ZipEntry db = z.getEntry("store.sqlite");
            assertNotNull(db, "store.sqlite in " + zip);
            assertNotNull(z.getEntry("manifest.json"), "manifest.json in " + zip);
            try (InputStream in = z.getInputStream(db)) {
                Files.copy(in, unzipped);
            }
            Map<?, ?> manifest = (Map<?, ?>) Json.parse(new String(
                    z.getInputStream(z.getEntry("manifest.json")).readAllBytes(), StandardCharsets.UTF_8));
            assertEquals(failedId, manifest.get("id"));
        }
        // The snapshot holds what the failing test wrote.
        try (Connection c = DriverManager.getConnection("jdbc:sqlite:" + unzipped);
             Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT count(*) FROM artists WHERE name = 'Left behind for the artifact'")) {
            assertTrue(rs.next());
            assertEquals(1, rs.getInt(1));
        }

        // The passed test's store is gone.
        LarderException gone = assertThrows(LarderException.class, () -> larder.store(passedId));
        assertEquals(404, gone.status());
        assertEquals("store_not_found", gone.code());
        try (var files = Files.list(artifacts)) {
            assertEquals(1, files.count(), "only the failed test leaves an artifact");
        }
        kept.delete();
    }

    /** A sample run in {@code work/NAME}: its output, store ids and labels, artifacts. */
    record Sample(String name, Process process, Path ids, Path artifacts, Path output) {
        /** Waits for the run; answers its output, checking that only SampleGalleryTest.failsOnPurpose failed. */
        String finish() throws Exception {
            SampleRun.finish(process, 90, output);
            String out = Files.readString(output);
            assertEquals(1, process.exitValue(), name + ": the launcher exits 1 when a test failed:\n" + out);
            assertTrue(out.contains("1 tests failed"), out);
            assertTrue(out.contains("this test fails on purpose"), out);
            return out;
        }

        String id(String test) throws Exception {
            return Files.readString(ids.resolve(test + ".id")).strip();
        }

        String label(String test) throws Exception {
            return Files.readString(ids.resolve(test + ".label"), StandardCharsets.UTF_8);
        }
    }

    static Sample sample(Path work, String name, List<String> javaOptions, Map<String, String> variables, String... classes)
            throws Exception {
        Path dir = Files.createDirectories(work.resolve(name));
        Path ids = Files.createDirectories(dir.resolve("ids"));
        Path artifacts = dir.resolve("artifacts");
        Path output = dir.resolve("launcher.out");
        Map<String, String> env = new HashMap<>(variables);
        env.put("LARDER_URL", server.url);
        env.put("LARDER_ARTIFACTS", artifacts.toString());
        env.put("LARDER_SAMPLE_IDS", ids.toString());
        List<String> cmd = SampleRun.command(javaOptions, SampleRun.client() + File.pathSeparator + SampleRun.samples(), classes);
        return new Sample(name, SampleRun.start(cmd, dir, env, output), ids, artifacts, output);
    }

    /** {@code DELETE /stores?label_prefix=PREFIX} with plain HTTP (the client has no call for it): how many went. */
    static long deleteByPrefix(String prefix) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                        URI.create(server.url + "/stores?label_prefix=" + URLEncoder.encode(prefix, StandardCharsets.UTF_8)))
                .DELETE().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return (Long) ((Map<?, ?>) Json.parse(r.body())).get("deleted");
    }

    static void assertGone(Larder larder, String id) {
        LarderException gone = assertThrows(LarderException.class, () -> larder.store(id));
        assertEquals("store_not_found", gone.code(), id);
    }

    @Test
    void withLarderRunEveryStoreIsLabelledRunPackageTestAndTheRunsKeptStoreGoesByItsPrefix(@TempDir Path work) throws Exception {
        String run = "java-run-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Larder larder = new Larder(server.url);
        // Another run's kept store, whose prefix starts with this run's (only RUN/ tells them apart).
        Store other = larder.createStore(StoreOptions.create().label(run + "0/dev.larder.sample.SampleGalleryTest/failsOnPurpose"));
        other.keep();

        // LARDER_RUN comes before the CI system's run id.
        Sample s = sample(work, "larder-run", List.of(),
                Map.of("LARDER_RUN", run, "GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123"),
                "dev.larder.sample.SampleGalleryTest", "dev.larder.sample.one.SameNameTest", "dev.larder.sample.two.SameNameTest");
        String out = s.finish();
        assertTrue(out.contains("7 tests successful"), out);

        String failedId = s.id("failsOnPurpose");
        Store kept = larder.store(failedId);
        assertEquals(true, kept.info().keep());
        assertEquals(run + "/dev.larder.sample.SampleGalleryTest/failsOnPurpose", kept.info().label());
        assertEquals(run + "/dev.larder.sample.SampleGalleryTest/failsOnPurpose", s.label("failsOnPurpose"));
        assertEquals(run + "/dev.larder.sample.SampleGalleryTest/passes", s.label("passes"));
        // The artifact keeps its name: the simple class name and the method.
        assertTrue(Files.isRegularFile(s.artifacts().resolve("SampleGalleryTest.failsOnPurpose-" + failedId + ".zip")), out);

        // Two tests of the same name in two classes of the same simple name, and in a nested class: three labels.
        assertEquals(run + "/dev.larder.sample.one.SameNameTest/sameName", s.label("one.sameName"));
        assertEquals(run + "/dev.larder.sample.two.SameNameTest/sameName", s.label("two.sameName"));
        assertEquals(run + "/dev.larder.sample.one.SameNameTest$Inner/sameName", s.label("one.Inner.sameName"));
        // Each invocation of a repeated test has its own.
        assertEquals(run + "/dev.larder.sample.one.SameNameTest/repeated repetition 1 of 2", s.label("one.repeated.1"));
        assertEquals(run + "/dev.larder.sample.one.SameNameTest/repeated repetition 2 of 2", s.label("one.repeated.2"));
        // 300 bytes of euro signs: cut to 256 bytes at a character boundary, keeping the start; the server took it.
        String full = run + "/dev.larder.sample.one.SameNameTest/longName " + "\u20ac".repeat(100);
        String cut = s.label("one.longName");
        assertTrue(full.startsWith(cut), cut);
        int bytes = cut.getBytes(StandardCharsets.UTF_8).length;
        assertTrue(bytes <= 256 && bytes > 256 - 3, bytes + " bytes: " + cut);
        assertTrue(cut.endsWith("\u20ac"), cut);
        assertEquals(SharedServer.cut(full, 256), cut);

        // The run's stores go at once, the kept one included; the other run's stays.
        assertEquals(1, deleteByPrefix(run + "/"));
        assertGone(larder, failedId);
        assertEquals(true, larder.store(other.id()).info().keep());
        other.delete();
    }

    @Test
    void theOptionWinsAndACiSystemsRunIdIsThePrefixOnItsOwnSystem(@TempDir Path work) throws Exception {
        String option = "java-option-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Larder larder = new Larder(server.url);
        // Both at once: -Dlarder.run over LARDER_RUN and GitHub's; GitHub's (with GITHUB_ACTIONS) alone.
        Sample withOption = sample(work, "option", List.of("-D" + SharedServer.RUN_PROPERTY + "=" + option),
                Map.of("LARDER_RUN", "not-this-one", "GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "not-this-either"),
                "dev.larder.sample.SampleGalleryTest");
        Sample github = sample(work, "github", List.of(), Map.of("GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123"),
                "dev.larder.sample.SampleGalleryTest");
        withOption.finish();
        github.finish();

        assertEquals(option + "/dev.larder.sample.SampleGalleryTest/failsOnPurpose",
                larder.store(withOption.id("failsOnPurpose")).info().label());
        assertEquals(option + "/dev.larder.sample.SampleGalleryTest/passes", withOption.label("passes"));
        assertEquals("123/dev.larder.sample.SampleGalleryTest/failsOnPurpose",
                larder.store(github.id("failsOnPurpose")).info().label());
        assertEquals("123/dev.larder.sample.SampleGalleryTest/passes", github.label("passes"));

        assertEquals(1, deleteByPrefix("123/"));
        assertGone(larder, github.id("failsOnPurpose"));
        assertEquals(true, larder.store(withOption.id("failsOnPurpose")).info().keep());
        assertEquals(1, deleteByPrefix(option + "/"));
        assertGone(larder, withOption.id("failsOnPurpose"));
    }
}
