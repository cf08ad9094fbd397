package dev.larder.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.larder.Json;
import dev.larder.SharedServer;
import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import java.io.IOException;
import java.io.Writer;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Run by SelfStartTest in subprocesses without LARDER_URL, so that the extension starts (or joins) a
 * server with `larder up`: two tests pass, one fails on purpose. Each test writes what it saw into
 * $LARDER_SAMPLE_IDS/<this JVM's pid>/: its store id (<method>.id), and in run.properties the URL, this
 * pid, and the shared server's folders under $TMPDIR/larder-UID/ (the server's pid, its binary, the
 * processes it serves). With $LARDER_SAMPLE_BARRIER and $LARDER_SAMPLE_PEERS, each test waits, once
 * it has its store, until that many JVMs have one (so that they run at the same time).
 */
@ExtendWith(LarderExtension.class)
class SampleSelfStartTest {
    @Test
    void first(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        record("first", store);
        assertEquals(4L, store.counts("artists").get("artists"));
    }

    @Test
    void second(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store) throws Exception {
        record("second", store);
        assertEquals(12L, store.counts("artworks").get("artworks"));
    }

    @Test
    void failsOnPurpose(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        record("failsOnPurpose", store);
        store.query("INSERT INTO artists(name) VALUES (?)", "Left behind for the artifact");
        assertEquals(99L, store.counts("artists").get("artists"), "this test fails on purpose");
    }

    private static void record(String test, Store store) throws Exception {
        String ids = System.getenv("LARDER_SAMPLE_IDS");
        if (ids == null) return;
        long pid = ProcessHandle.current().pid();
        Path dir = Files.createDirectories(Path.of(ids, Long.toString(pid)));
        Files.writeString(dir.resolve(test + ".id"), store.id());
        rendezvous(pid);

        Properties run = new Properties();
        run.setProperty("url", SharedServer.url());
        run.setProperty("pid", Long.toString(pid));
        List<String> folders = new ArrayList<>();
        String tmp = System.getenv("TMPDIR");
        try (DirectoryStream<Path> users = Files.newDirectoryStream(Path.of(tmp == null ? "/tmp" : tmp), "larder-*")) {
            for (Path user : users) {
                try (DirectoryStream<Path> keys = Files.newDirectoryStream(user)) {
                    for (Path key : keys) {
                        if (!Files.isRegularFile(key.resolve("server.json"))) continue;
                        folders.add(key.toString());
                        Map<?, ?> state = (Map<?, ?>) Json.parse(Files.readString(key.resolve("server.json")));
                        run.setProperty("server.url", String.valueOf(state.get("url")));
                        run.setProperty("server.pid", String.valueOf(state.get("pid")));
                        run.setProperty("server.binary", Files.readSymbolicLink(Path.of("/proc", String.valueOf(state.get("pid")), "exe")).toString());
                        TreeSet<String> served = new TreeSet<>();
                        try (DirectoryStream<Path> u = Files.newDirectoryStream(key.resolve("users"))) {
                            for (Path p : u) served.add(p.getFileName().toString());
                        }
                        run.setProperty("server.serves", String.join(",", served));
                    }
                }
            }
        }
        run.setProperty("folders", String.join(",", folders));
        Path file = dir.resolve("run.properties");
        Path partial = dir.resolve("run.properties.tmp");
        try (Writer w = Files.newBufferedWriter(partial)) {
            run.store(w, null);
        }
        Files.move(partial, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    /** Waits (up to 60 s) until $LARDER_SAMPLE_PEERS JVMs have written into $LARDER_SAMPLE_BARRIER. */
    private static void rendezvous(long pid) throws IOException, InterruptedException {
        String barrier = System.getenv("LARDER_SAMPLE_BARRIER");
        String peers = System.getenv("LARDER_SAMPLE_PEERS");
        if (barrier == null || peers == null) return;
        Path dir = Files.createDirectories(Path.of(barrier));
        Files.writeString(dir.resolve(Long.toString(pid)), "");
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            try (var files = Files.list(dir)) {
                if (files.count() >= Long.parseLong(peers)) return;
            }
            assertTrue(System.nanoTime() < deadline, "the other JVMs did not come within 60 s");
            Thread.sleep(50);
        }
    }
}
