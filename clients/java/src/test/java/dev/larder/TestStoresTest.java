package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link TestStores} in this JVM against a real server (issue 48): stores made ahead, handed out fresh; the bound on
 * their age; a spec change; the relabel (before the handle's first request, or by the watch thread); deletes in the
 * background and their failures; the session's end. Waits are for events, each with a deadline.
 */
class TestStoresTest {
    static TestServer server;
    static Larder larder;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
        larder = new Larder(server.url);
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    static String run() {
        return "java-stores-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    }

    static StoreOptions artists() {
        return StoreOptions.forTemplate("gallery").fixtures("artists");
    }

    /** The stores whose label is {@code label} ({@code prefix}: starts with it), as the server lists them. */
    static List<Map<?, ?>> stores(String key, String value) throws Exception {
        HttpURLConnection c = (HttpURLConnection) URI.create(server.url + "/stores?" + key + "="
                + URLEncoder.encode(value, StandardCharsets.UTF_8)).toURL().openConnection();
        try (InputStream in = c.getInputStream()) {
            Map<?, ?> answer = (Map<?, ?>) Json.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            return ((List<?>) answer.get("stores")).stream().<Map<?, ?>>map(s -> (Map<?, ?>) s).toList();
        }
    }

    static Map<?, ?> store(String id) throws Exception {
        HttpURLConnection c = (HttpURLConnection) URI.create(server.url + "/stores/" + id).toURL().openConnection();
        if (c.getResponseCode() == 404) return null;
        try (InputStream in = c.getInputStream()) {
            return (Map<?, ?>) Json.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    static void await(String what, BooleanSupplier done) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what + ": not within 30 s");
            Thread.sleep(10);
        }
    }

    /** Waits for the one store labelled {@code readyLabel}: its id. */
    static String awaitReady(String readyLabel) throws Exception {
        String[] id = new String[1];
        await("a store made ahead, labelled " + readyLabel, () -> {
            try {
                List<Map<?, ?>> found = stores("label", readyLabel);
                if (found.size() != 1) return false;
                id[0] = (String) found.get(0).get("id");
                return true;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        return id[0];
    }

    static boolean gone(String id) {
        try {
            return store(id) == null;
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void theNextStoreOfASpecIsTheOneMadeAheadFreshAndItsOwn() throws Exception {
        String run = run();
        String ready = run + "/Pkg/" + TestStores.READY_NAME;
        try (TestStores stores = new TestStores(larder)) {
            Store first = stores.take(artists(), run + "/Pkg/first", ready);
            assertEquals(run + "/Pkg/first", first.info().label());
            first.query("INSERT INTO artists(name) VALUES ('First only')");
            String ahead = awaitReady(ready);
            assertNotEquals(first.id(), ahead);

            Store second = stores.take(artists(), run + "/Pkg/second", ready);
            assertEquals(ahead, second.id());
            // The handle says the test's label at once; the server once the handle makes a request.
            assertEquals(run + "/Pkg/second", second.created().label());
            assertEquals(run + "/Pkg/second", second.info().label());
            assertEquals(Map.of("artists", 4L), second.counts("artists"), "fresh: the template and its fixture");
            assertEquals(5L, first.counts("artists").get("artists"), "the first keeps its own row");
            assertEquals(List.of(), second.query("SELECT name FROM artists WHERE name = 'First only'").rows());

            TestStores.Request d1 = stores.delete(first, "first");
            TestStores.Request d2 = stores.delete(second, "second");
            d1.await();
            d2.await();
            assertTrue(gone(first.id()) && gone(second.id()));
        }
        // The session's end: the store made ahead for a third test went too.
        assertEquals(List.of(), stores("label_prefix", run + "/"));
    }

    @Test
    void anotherSpecDeletesTheStoreMadeAheadAndAnOldOneIsNotHandedOut() throws Exception {
        String run = run();
        String ready = run + "/Pkg/" + TestStores.READY_NAME;
        try (TestStores stores = new TestStores(larder)) {
            Store a = stores.take(artists(), run + "/Pkg/a", ready);
            String aheadForA = awaitReady(ready);
            Store b = stores.take(StoreOptions.forTemplate("gallery").fixtures("artists", "artworks"), run + "/Pkg/b", ready);
            assertNotEquals(aheadForA, b.id());
            assertEquals(12L, b.counts("artworks").get("artworks"));
            await("the store made ahead of another spec is deleted", () -> gone(aheadForA));
            stores.delete(a, "a").await();
            stores.delete(b, "b").await();
        }
        assertEquals(List.of(), stores("label_prefix", run + "/"));

        // No age is young enough: the store made ahead is deleted, and the test's made now.
        run = run();
        ready = run + "/Pkg/" + TestStores.READY_NAME;
        try (TestStores stores = new TestStores(larder, Duration.ZERO)) {
            Store a = stores.take(artists(), run + "/Pkg/a", ready);
            String ahead = awaitReady(ready);
            Store again = stores.take(artists(), run + "/Pkg/again", ready);
            assertNotEquals(ahead, again.id());
            assertEquals(run + "/Pkg/again", store(again.id()).get("label"), "made now, with its label");
            await("the old store made ahead is deleted", () -> gone(ahead));
            stores.delete(a, "a").await();
            stores.delete(again, "again").await();
        }
        assertEquals(List.of(), stores("label_prefix", run + "/"));
    }

    @Test
    void theAgeBoundIsAFifthOfAShortLifetime() {
        Map<String, Object> json = new java.util.HashMap<>(Map.of("id", "st_1", "path", "/x/store.sqlite",
                "created_at", "2026-01-01T00:00:00.000Z", "expires_at", "2026-01-01T01:00:00.000Z"));
        assertEquals(TestStores.READY_MAX_AGE, TestStores.maxAge(StoreInfo.from(json), TestStores.READY_MAX_AGE), "an hour's store: 60 s");
        json.put("expires_at", "2026-01-01T00:01:40.000Z");
        assertEquals(Duration.ofSeconds(20), TestStores.maxAge(StoreInfo.from(json), TestStores.READY_MAX_AGE), "a 100 s store: 20 s");
        json.put("expires_at", null);
        assertEquals(TestStores.READY_MAX_AGE, TestStores.maxAge(StoreInfo.from(json), TestStores.READY_MAX_AGE), "kept forever");
    }

    @Test
    void aStoreHeldLongIsRelabelledWithoutItsHandle() throws Exception {
        String run = run();
        String ready = run + "/Pkg/" + TestStores.READY_NAME;
        try (TestStores stores = new TestStores(larder)) {
            Store first = stores.take(artists(), run + "/Pkg/first", ready);
            awaitReady(ready);
            Store held = stores.take(artists(), run + "/Pkg/held", ready);
            // No request through the handle: the watch thread relabels it once it has been held a while.
            await("the store held is relabelled", () -> {
                try {
                    return (run + "/Pkg/held").equals(store(held.id()).get("label"));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            stores.delete(first, "first").await();
            stores.delete(held, "held").await();
        }
        assertEquals(List.of(), stores("label_prefix", run + "/"));
    }

    @Test
    void aFailedKeepOfAStoreMadeAheadCarriesTheTestsLabel() throws Exception {
        String run = run();
        String ready = run + "/Pkg/" + TestStores.READY_NAME;
        Store failed;
        try (TestStores stores = new TestStores(larder)) {
            Store first = stores.take(artists(), run + "/Pkg/first", ready);
            awaitReady(ready);
            failed = stores.take(artists(), run + "/Pkg/failed", ready);
            StoreInfo kept = failed.keep(run + "/Pkg/failed");
            assertTrue(kept.keep());
            assertEquals(run + "/Pkg/failed", kept.label());
            stores.delete(first, "first").await();
        }
        assertEquals(List.of(failed.id()), stores("label_prefix", run + "/").stream().map(s -> s.get("id")).toList());
        assertEquals(run + "/Pkg/failed", store(failed.id()).get("label"));
        failed.delete();
    }

    @Test
    void aDeleteThatFailsIsThrownByAwaitElseByClose() throws Exception {
        String run = run();
        String ready = run + "/Pkg/" + TestStores.READY_NAME;
        TestStores stores = new TestStores(larder);
        Store one = stores.take(artists(), run + "/Pkg/one", ready);
        Store two = stores.take(artists(), run + "/Pkg/two", ready);
        // Deleted behind the helper's back: its own delete answers 404.
        new Larder(server.url).store(one.id()).delete();
        new Larder(server.url).store(two.id()).delete();
        TestStores.Request awaited = stores.delete(one, "Pkg.one");
        LarderException e = assertThrows(LarderException.class, awaited::await);
        assertEquals(404, e.status());
        assertTrue(e.getMessage().startsWith("larder: deleting store " + one.id() + " (Pkg.one passed) failed: "), e.getMessage());
        stores.delete(two, "Pkg.two"); // not awaited: close() throws it, and not the one awaited
        LarderException atClose = assertThrows(LarderException.class, stores::close);
        assertTrue(atClose.getMessage().startsWith("larder: deleting store " + two.id() + " (Pkg.two passed) failed: "), atClose.getMessage());
        assertEquals(0, atClose.getSuppressed().length, "the awaited failure is not thrown twice");
        stores.close(); // once is all
        assertEquals(List.of(), stores("label_prefix", run + "/"));
    }

    @Test
    void aForkIsMadeNowAndAfterCloseEverythingIsAtOnce() throws Exception {
        String run = run();
        String ready = run + "/Pkg/" + TestStores.READY_NAME;
        Store source = larder.createStore(artists().label(run + "/source"));
        TestStores stores = new TestStores(larder);
        Store fork = stores.take(StoreOptions.create().from(source), run + "/Pkg/fork", ready);
        assertEquals(run + "/Pkg/fork", store(fork.id()).get("label"));
        stores.close();
        // After close: made now, and deleted now.
        Store late = stores.take(artists(), run + "/Pkg/late", ready);
        assertEquals(run + "/Pkg/late", store(late.id()).get("label"));
        TestStores.Request d = stores.delete(late, "late");
        assertTrue(gone(late.id()));
        d.await();
        stores.delete(fork, "fork").await();
        source.delete();
        assertFalse(stores("label_prefix", run + "/").stream().anyMatch(s -> ready.equals(s.get("label"))));
        assertEquals(List.of(), stores("label_prefix", run + "/"));
    }
}
