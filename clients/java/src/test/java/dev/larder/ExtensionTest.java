package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.InputStream;
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
 * The JUnit 5 extension, end to end: the JUnit console launcher runs the sample test class
 * (dev.larder.sample.SampleGalleryTest, one pass and one deliberate failure) in a subprocess
 * against a real server; the failed test's store must be kept with its artifact saved, the passed
 * test's store deleted.
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
        assertEquals(true, kept.info().get("keep"));
        assertEquals("SampleGalleryTest.failsOnPurpose", kept.info().get("label"));
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
}
