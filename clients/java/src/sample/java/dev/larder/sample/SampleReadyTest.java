package dev.larder.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.larder.Json;
import dev.larder.SharedServer;
import dev.larder.Store;
import dev.larder.TestStores;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Run by ReadyStoreTest in a subprocess (JUnit console launcher), in this order: what the extension does in the
 * background (issue 48). {@code first} waits until the store made ahead for the next test is on the server and
 * records its id; {@code second} (the same spec) must get that one, fresh; {@code third} (another spec) waits
 * until {@code second}'s ready store is deleted; {@code failsOnPurpose} (a store made ahead, never used through its
 * handle) fails after writing a row; {@code deletesItsOwnStore} passes after deleting its store behind the
 * extension's back, so that the extension's delete in the background fails. Each writes what it saw into
 * $LARDER_SAMPLE_IDS/ready.NAME.*; at exit, a shutdown hook writes the stores labelled $LARDER_RUN/ that are left
 * on the server into ready.left (JUnit has closed the extension's session by then; a self-started server is
 * still up, serving this JVM).
 */
@ExtendWith(LarderExtension.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SampleReadyTest {
    static final String READY_LABEL = SharedServer.label(SampleReadyTest.class.getName(), TestStores.READY_NAME);

    static {
        if (System.getenv("LARDER_SAMPLE_IDS") != null) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    List<String> left = new ArrayList<>();
                    for (Map<?, ?> s : stores("label_prefix=" + URLEncoder.encode(SharedServer.run() + "/", StandardCharsets.UTF_8))) {
                        left.add(String.valueOf(s.get("id")));
                    }
                    write("left", String.join(",", left));
                } catch (Exception e) {
                    try {
                        write("left", "error: " + e);
                    } catch (IOException ignored) {
                        // nothing to say it with
                    }
                }
            }));
        }
    }

    @Test
    @Order(1)
    void first(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        write("first.id", store.id());
        SampleRemoteTest.sqlite(store.path(), "INSERT INTO artists(name) VALUES ('Only in the first store');");
        write("first.ahead", awaitReady("[\"artists\"]"));
    }

    @Test
    @Order(2)
    void second(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws Exception {
        write("second.id", store.id());
        write("second.created.label", store.created().label());
        // Fresh: the template with its fixture, nothing of the first test's.
        write("second.artists", SampleRemoteTest.sqlite(store.path(), "SELECT count(*) FROM artists;"));
        write("second.leftover", SampleRemoteTest.sqlite(store.path(), "SELECT count(*) FROM artists WHERE name = 'Only in the first store';"));
        write("second.label", store.info().label()); // through the handle: relabelled first
        write("second.ahead", awaitReady("[\"artists\"]"));
    }

    @Test
    @Order(3)
    void third(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store) throws Exception {
        write("third.id", store.id());
        // Another spec: the store made ahead for the first spec goes.
        String ahead = Files.readString(ids().resolve("ready.second.ahead"));
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (status("/stores/" + ahead) != 404) {
            assertTrue(System.nanoTime() < deadline, "the store made ahead of another spec, " + ahead + ", is still there after 30 s");
            Thread.sleep(20);
        }
        write("third.discarded", ahead);
        assertEquals(12L, store.counts("artworks").get("artworks"));
    }

    @Test
    @Order(4)
    void failsOnPurpose(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store) throws Exception {
        write("failsOnPurpose.id", store.id()); // no request through the handle: its relabel is still to be sent
        SampleRemoteTest.sqlite(store.path(), "INSERT INTO artists(name) VALUES ('Kept for the artifact');");
        fail("this ready-store test fails on purpose");
    }

    @Test
    @Order(5)
    void deletesItsOwnStore(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store) throws Exception {
        write("deletesItsOwnStore.id", store.id());
        assertEquals(204, request("DELETE", "/stores/" + store.id()));
    }

    /** Waits (up to 30 s) until one store labelled {@link #READY_LABEL} with {@code fixtures} is on the server; its id. */
    private static String awaitReady(String fixtures) throws Exception {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (true) {
            for (Map<?, ?> s : stores("label=" + URLEncoder.encode(READY_LABEL, StandardCharsets.UTF_8))) {
                if (Json.write(s.get("fixtures")).equals(fixtures)) return String.valueOf(s.get("id"));
            }
            assertTrue(System.nanoTime() < deadline, "no store made ahead with fixtures " + fixtures + " after 30 s");
            Thread.sleep(20);
        }
    }

    @SuppressWarnings("unchecked")
    private static List<Map<?, ?>> stores(String query) throws IOException {
        HttpURLConnection c = (HttpURLConnection) URI.create(SharedServer.url() + "/stores?" + query).toURL().openConnection();
        try (InputStream in = c.getInputStream()) {
            Map<?, ?> answer = (Map<?, ?>) Json.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            return (List<Map<?, ?>>) answer.get("stores");
        }
    }

    private static int status(String path) throws IOException {
        return request("GET", path);
    }

    private static int request(String method, String path) throws IOException {
        HttpURLConnection c = (HttpURLConnection) URI.create(SharedServer.url() + path).toURL().openConnection();
        c.setRequestMethod(method);
        int status = c.getResponseCode();
        InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
        if (in != null) in.close();
        return status;
    }

    private static Path ids() {
        return Path.of(System.getenv("LARDER_SAMPLE_IDS"));
    }

    private static void write(String name, String value) throws IOException {
        if (System.getenv("LARDER_SAMPLE_IDS") == null) return;
        Files.writeString(ids().resolve("ready." + name), String.valueOf(value), StandardCharsets.UTF_8);
    }
}
