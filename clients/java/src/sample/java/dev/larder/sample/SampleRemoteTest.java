package dev.larder.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Run by RemoteTest in a subprocess (JUnit console launcher) against a server whose files it cannot see,
 * with LARDER_MODE=remote: each test writes to its store's local copy with the sqlite3 command-line tool
 * and records its store id, label and local path into $LARDER_SAMPLE_IDS/remote.<method>.id, .label, .path.
 * One passes, one fails on purpose (its copy is checked in by the extension), one fails after spoiling its
 * copy so that the check-in fails too.
 */
@ExtendWith(LarderExtension.class)
class SampleRemoteTest {
    @Test
    void passes(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        record("passes", store);
        assertTrue(store.isRemote());
        assertTrue(Files.isRegularFile(store.path()), "the local copy: " + store.path());
        assertFalse(Files.exists(store.created().path()), "the server's file is out of sight: " + store.created().path());
        sqlite(store.path(), "INSERT INTO artists(name) VALUES ('Passing by');");
        assertEquals("5", sqlite(store.path(), "SELECT count(*) FROM artists;"));
    }

    @Test
    void failsOnPurpose(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        record("failsOnPurpose", store);
        sqlite(store.path(), "INSERT INTO artists(name) VALUES ('Left in the copy');");
        fail("this remote test fails on purpose");
    }

    @Test
    void failsWithASpoiledCopy(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        record("failsWithASpoiledCopy", store);
        Files.writeString(store.path(), "not a database", StandardCharsets.UTF_8);
        fail("this remote test fails on purpose with a copy the server refuses");
    }

    private static void record(String name, Store store) throws Exception {
        SampleRecord.record("remote." + name, store);
        String dir = System.getenv("LARDER_SAMPLE_IDS");
        if (dir != null) Files.writeString(Path.of(dir, "remote." + name + ".path"), store.path().toString());
    }

    /** {@code sqlite3 -batch DB SQL}: its output, stripped; fails unless it exits 0. */
    static String sqlite(Path db, String sql) throws Exception {
        Process p = new ProcessBuilder("sqlite3", "-batch", db.toString(), sql).redirectErrorStream(true)
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) throw new AssertionError("sqlite3 " + db + " failed: " + out);
        return out;
    }
}
