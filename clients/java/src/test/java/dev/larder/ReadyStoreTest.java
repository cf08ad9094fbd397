package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The extension's work in the background (issue 48), end to end: the sample class dev.larder.sample.SampleReadyTest
 * (its tests in order) run by the JUnit console launcher in a JVM of its own, with LARDER_URL and self-started.
 * The next test of a spec gets the store made ahead, fresh; another spec deletes it; a failed test's store (made
 * ahead) is kept with its test's label and artifact; a delete that fails in the background fails the test's class,
 * naming the test; and the session's end leaves no store of the run on the server.
 */
class ReadyStoreTest {
    static final String SAMPLE = "dev.larder.sample.SampleReadyTest";

    @TempDir
    Path work;

    /** What a sample run left: its output, its records ($LARDER_SAMPLE_IDS/ready.*), the artifacts folder. */
    record Run(String run, String output, Path ids, Path artifacts) {
        String get(String name) throws Exception {
            return Files.readString(ids.resolve("ready." + name), StandardCharsets.UTF_8).strip();
        }
    }

    private Run run(String name, Map<String, String> variables, List<String> javaOptions, Path dir) throws Exception {
        String run = "java-ready-" + name + "-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Path ids = Files.createDirectories(work.resolve(name + "-ids"));
        Path artifacts = work.resolve(name + "-artifacts");
        Path output = work.resolve(name + ".out");
        Map<String, String> env = new HashMap<>(variables);
        env.put("LARDER_RUN", run);
        env.put("LARDER_ARTIFACTS", artifacts.toString());
        env.put("LARDER_SAMPLE_IDS", ids.toString());
        List<String> cmd = SampleRun.command(javaOptions, SampleRun.client() + File.pathSeparator + SampleRun.samples(), SAMPLE);
        Process p = SampleRun.start(cmd, dir, env, output);
        int status = SampleRun.finish(p, 120, output);
        String out = Files.readString(output);
        assertEquals(1, status, "the launcher exits 1 when a test failed:\n" + out);
        return new Run(run, out, ids, artifacts);
    }

    /** What every sample run must show, whichever server it had. */
    private static void check(Run r, Larder larder) throws Exception {
        String out = r.output();
        assertTrue(out.contains("4 tests successful"), out);
        assertTrue(out.contains("1 tests failed"), out);
        assertTrue(out.contains("this ready-store test fails on purpose"), out);

        // The second test got the store made ahead while the first ran: fresh, and not the first's.
        assertEquals(r.get("first.ahead"), r.get("second.id"), out);
        assertNotEquals(r.get("first.id"), r.get("second.id"));
        assertEquals("4", r.get("second.artists"));
        assertEquals("0", r.get("second.leftover"), "nothing of the first test's store is in the second's");
        // Its label is its test's, in its handle and on the server.
        String prefix = r.run() + "/dev.larder.sample.SampleReadyTest/";
        assertEquals(prefix + "second", r.get("second.created.label"));
        assertEquals(prefix + "second", r.get("second.label"));
        // Another spec: the store made ahead for the first was deleted (the third test saw it go).
        assertEquals(r.get("second.ahead"), r.get("third.discarded"));

        // The failed test's store, made ahead, is kept with its test's label and its artifact.
        String failed = r.get("failsOnPurpose.id");
        StoreInfo kept = larder == null ? null : larder.store(failed).info();
        if (kept != null) {
            assertTrue(kept.keep());
            assertEquals(prefix + "failsOnPurpose", kept.label());
        }
        assertTrue(out.contains("kept store " + failed), out);
        Path zip = r.artifacts().resolve("SampleReadyTest.failsOnPurpose-" + failed + ".zip");
        try (ZipFile z = new ZipFile(zip.toFile())) {
            ZipEntry manifest = z.getEntry("manifest.json");
            assertNotNull(manifest, "manifest.json in " + zip);
            try (InputStream in = z.getInputStream(manifest)) {
                Map<?, ?> m = (Map<?, ?>) Json.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
                assertEquals(failed, m.get("id"));
                assertEquals(prefix + "failsOnPurpose", m.get("label"), "the artifact names the test too");
            }
            Path db = Files.createTempFile(r.ids(), "kept", ".sqlite");
            try (InputStream in = z.getInputStream(z.getEntry("store.sqlite"))) {
                Files.copy(in, db, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            }
            assertEquals(1, SqliteCli.count(db, "SELECT count(*) FROM artists WHERE name = 'Kept for the artifact';"));
        }

        // The delete that failed in the background is reported: printed, and the class fails, naming the test.
        String deleted = r.get("deletesItsOwnStore.id");
        String message = "larder: deleting store " + deleted + " (SampleReadyTest.deletesItsOwnStore passed) failed: ";
        assertTrue(out.contains(message), out);
        assertTrue(out.contains("deletesItsOwnStore(Store) \u2714"), "the test itself passed:\n" + out);
        assertTrue(out.contains("1 containers failed"), "its class failed:\n" + out);

        // At the session's end (before the JVM exited), only the kept store was left of the run.
        assertEquals(failed, r.get("left"), out);
    }

    /** The ids of the stores whose label starts with {@code prefix} ({@code GET /stores?label_prefix=}). */
    static List<String> idsByPrefix(String url, String prefix) throws Exception {
        java.net.HttpURLConnection c = (java.net.HttpURLConnection) java.net.URI.create(url + "/stores?label_prefix="
                + java.net.URLEncoder.encode(prefix, StandardCharsets.UTF_8)).toURL().openConnection();
        try (InputStream in = c.getInputStream()) {
            Map<?, ?> answer = (Map<?, ?>) Json.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            return ((List<?>) answer.get("stores")).stream().map(s -> String.valueOf(((Map<?, ?>) s).get("id"))).toList();
        }
    }

    @Test
    void withLarderUrl() throws Exception {
        TestServer server = TestServer.start();
        try {
            Larder larder = new Larder(server.url);
            Run r = run("url", Map.of("LARDER_URL", server.url), List.of(), work);
            check(r, larder);
            // And after it: the run's stores are the kept one alone.
            assertEquals(List.of(r.get("failsOnPurpose.id")), idsByPrefix(server.url, r.run() + "/"));
            larder.store(r.get("failsOnPurpose.id")).delete();
        } finally {
            server.close();
        }
    }

    @Test
    void selfStarted() throws Exception {
        Path project = Files.createDirectories(work.resolve("project"));
        SelfStartTest.copyTree(TestServer.fixtures().resolve("gallery"), project.resolve("fixtures").resolve("gallery"));
        Path tmp = Files.createDirectories(work.resolve("tmp"));
        Map<String, String> env = new HashMap<>();
        env.put("TMPDIR", tmp.toString());
        env.put("LARDER_BINARY", TestServer.binary().toString());
        Run r = run("self", env, List.of("-Djava.io.tmpdir=" + tmp), project);
        check(r, null); // the server is gone with the JVM: the sample's records say what it held
    }
}
