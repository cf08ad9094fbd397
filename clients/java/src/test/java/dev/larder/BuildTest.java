package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * App-built templates ({@link Larder#build}) against a real server, with the xerial SQLite JDBC driver
 * as the application's own driver and migrator.
 */
class BuildTest {
    static TestServer server;
    static Larder larder;

    private String key;
    private ExecutorService pool;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
        larder = new Larder(server.url, null);
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    @BeforeEach
    void uniqueKey(TestInfo info) {
        // [A-Za-z0-9._-]{1,128}: the method's name and a random part, so that no two tests (or runs) share one
        key = "java-" + info.getTestMethod().orElseThrow().getName() + "-" + Long.toHexString(System.nanoTime());
        pool = Executors.newFixedThreadPool(3);
    }

    @AfterEach
    void shutDown() throws InterruptedException {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS), "a build thread is still running");
    }

    /** What Django's migrator leaves: its own bookkeeping table, and the app's tables with some rows. */
    private static void djangoLikeMigrate(Path path) throws SQLException {
        try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + path)) {
            db.setAutoCommit(false);
            try (Statement s = db.createStatement()) {
                s.executeUpdate("CREATE TABLE django_migrations (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, "
                        + "app varchar(255) NOT NULL, name varchar(255) NOT NULL, applied datetime NOT NULL)");
                s.executeUpdate("CREATE TABLE shop_product (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, "
                        + "name varchar(100) NOT NULL UNIQUE, price_cents integer NOT NULL)");
            }
            try (PreparedStatement m = db.prepareStatement(
                    "INSERT INTO django_migrations(app, name, applied) VALUES (?, ?, '2024-06-13 06:11:02')")) {
                for (String name : List.of("0001_initial", "0002_product_price")) {
                    m.setString(1, "shop");
                    m.setString(2, name);
                    m.executeUpdate();
                }
            }
            try (PreparedStatement p = db.prepareStatement("INSERT INTO shop_product(name, price_cents) VALUES (?, ?)")) {
                String[] names = {"teapot", "kettle", "mug"};
                for (int i = 0; i < names.length; i++) {
                    p.setString(1, names[i]);
                    p.setInt(2, 100 * (i + 1));
                    p.executeUpdate();
                }
            }
            db.commit();
        }
    }

    private static long countProducts(Path path) throws SQLException {
        try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + path);
             Statement s = db.createStatement();
             var rs = s.executeQuery("SELECT count(*) FROM shop_product")) {
            assertTrue(rs.next());
            return rs.getLong(1);
        }
    }

    /**
     * Whether the server logged a request {@code method path} (query aside) answered with one of
     * {@code statuses}: to see which way a build went. The log line may follow the answer by a moment.
     */
    private static boolean logged(String method, String path, int... statuses) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        do {
            for (String line : Files.readAllLines(server.stderr)) {
                if (!line.startsWith("{")) continue;
                Map<String, Object> entry = Json.asObject(Json.parse(line), "log line");
                Object p = entry.get("path");
                if (method.equals(entry.get("method")) && p instanceof String s && (s.equals(path) || s.startsWith(path + "?"))
                        && entry.get("status") instanceof Number n) {
                    for (int status : statuses) if (n.intValue() == status) return true;
                }
            }
            Thread.sleep(50);
        } while (System.nanoTime() < until);
        return false;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    @Test
    void buildsWithTheAppsOwnDriverAndHandsOutIndependentCopies() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        String answered = larder.build(key, "java build test", Duration.ofSeconds(60), path -> {
            runs.incrementAndGet();
            assertTrue(path.isAbsolute(), "the path is absolute: " + path);
            assertTrue(Files.isRegularFile(path), "the build's file exists: " + path);
            djangoLikeMigrate(path);
        });
        assertEquals(key, answered);
        assertEquals(1, runs.get());

        BuildInfo info = larder.buildInfo(key);
        assertEquals(key, info.key());
        assertTrue(info.isReady(), info.toString());
        assertFalse(info.isBuilding());
        assertEquals("ready", info.state());
        assertEquals("java build test", info.label());
        assertNull(info.path(), "a ready build has no path");
        assertEquals(3L, info.counts().get("shop_product"));
        assertNotNull(info.sizeBytes());
        assertTrue(info.sizeBytes() > 0, info.toString());
        assertNotNull(info.startedAt());
        assertNotNull(info.finishedAt());
        assertTrue(larder.builds().stream().anyMatch(b -> b.key().equals(key) && b.isReady()), larder.builds().toString());

        // ready: a second build() answers at once, without migrating
        assertEquals(key, larder.build(key, path -> fail("migrate ran for a ready build")));

        Store one = larder.createStore(StoreOptions.create().build(key).label("java build copy one"));
        Store two = larder.createStore(StoreOptions.create().build(key).label("java build copy two").buildTimeout(Duration.ofSeconds(5)));
        try {
            assertEquals(key, one.created().build());
            assertEquals(key, one.info().build());
            assertEquals(key, two.info().build());
            assertEquals(3L, one.counts("shop_product").get("shop_product"));
            assertEquals(3L, countProducts(two.path()));
            assertEquals(2L, one.query("SELECT count(*) FROM django_migrations WHERE app = 'shop'").scalar());

            // a write to one copy does not show in the other, nor in the build
            try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + one.path());
                 Statement s = db.createStatement()) {
                assertEquals(1, s.executeUpdate("INSERT INTO shop_product(name, price_cents) VALUES ('spoon', 50)"));
            }
            assertEquals(4L, one.counts("shop_product").get("shop_product"));
            assertEquals(3L, two.counts("shop_product").get("shop_product"));
            assertEquals(3L, countProducts(two.path()));
            assertEquals(3L, larder.buildInfo(key).counts().get("shop_product"));
            assertEquals(3L, larder.createStore(StoreOptions.create().build(key)).counts().get("shop_product"));

            // discarding the build leaves its stores as they are; the next build() builds again
            larder.discardBuild(key);
            LarderException gone = assertThrows(LarderException.class, () -> larder.buildInfo(key));
            assertEquals(404, gone.status());
            assertEquals("unknown_build", gone.code());
            assertEquals(4L, one.counts("shop_product").get("shop_product"));
            assertEquals(key, larder.build(key, BuildTest::djangoLikeMigrate));
            assertTrue(larder.buildInfo(key).isReady());
        } finally {
            one.delete();
            two.delete();
        }
    }

    @Test
    void twoCallersAtOnceMigrateOnceAndTheWaiterReturnsAfterTheBuilder() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        AtomicLong migrateDone = new AtomicLong();
        CyclicBarrier together = new CyclicBarrier(2);
        BuildStep migrate = path -> {
            runs.incrementAndGet();
            Thread.sleep(500);
            djangoLikeMigrate(path);
            migrateDone.set(System.nanoTime());
        };
        List<Future<long[]>> calls = List.of(
                pool.submit(() -> {
                    together.await(10, TimeUnit.SECONDS);
                    String k = larder.build(key, migrate);
                    return new long[] {k.equals(key) ? 1 : 0, System.nanoTime()};
                }),
                pool.submit(() -> {
                    together.await(10, TimeUnit.SECONDS);
                    String k = larder.build(key, "same key", Duration.ofSeconds(30), migrate);
                    return new long[] {k.equals(key) ? 1 : 0, System.nanoTime()};
                }));
        for (Future<long[]> call : calls) {
            long[] r = call.get(60, TimeUnit.SECONDS);
            assertEquals(1, r[0], "build() answers the key");
            assertTrue(r[1] >= migrateDone.get(), "a build() returned "
                    + TimeUnit.NANOSECONDS.toMillis(migrateDone.get() - r[1]) + " ms before the migrate finished");
        }
        assertEquals(1, runs.get(), "migrate ran once");
        assertTrue(logged("GET", "/builds/" + key, 200), "the second caller waited for the build (a long poll)");
        assertTrue(larder.buildInfo(key).isReady());
        assertEquals(3L, larder.buildInfo(key).counts().get("shop_product"));
    }

    @Test
    void aStoreOfABuildStillRunningWaitsForIt() throws Exception {
        CountDownLatch migrating = new CountDownLatch(1);
        AtomicLong migrateDone = new AtomicLong();
        Future<String> builder = pool.submit(() -> larder.build(key, path -> {
            migrating.countDown();
            Thread.sleep(500);
            djangoLikeMigrate(path);
            migrateDone.set(System.nanoTime());
        }));
        assertTrue(migrating.await(10, TimeUnit.SECONDS));
        assertTrue(larder.buildInfo(key).isBuilding());
        Store store = larder.createStore(StoreOptions.create().build(key).buildTimeout(Duration.ofSeconds(20)));
        try {
            long created = System.nanoTime();
            assertTrue(created >= migrateDone.get() && migrateDone.get() != 0, "the store was made before the build was ready");
            assertEquals(3L, store.counts("shop_product").get("shop_product"));
            assertEquals(key, builder.get(30, TimeUnit.SECONDS));
        } finally {
            store.delete();
        }
    }

    @Test
    void aFailedMigrateDiscardsTheBuildAndPropagates() throws Exception {
        IllegalStateException boom = new IllegalStateException("migration 0003 failed");
        IllegalStateException thrown = assertThrows(IllegalStateException.class, () -> larder.build(key, path -> {
            try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + path);
                 Statement s = db.createStatement()) {
                s.executeUpdate("CREATE TABLE half_done (id INTEGER PRIMARY KEY)");
            }
            throw boom;
        }));
        assertSame(boom, thrown, "the migrator's own exception");
        assertTrue(logged("DELETE", "/builds/" + key, 204), "the failed builder discarded the build");
        LarderException gone = assertThrows(LarderException.class, () -> larder.buildInfo(key));
        assertEquals(404, gone.status());
        assertEquals("unknown_build", gone.code());

        // a checked exception comes wrapped, as the cause of a LarderException
        SQLException sql = new SQLException("no such table: shop_category");
        LarderException wrapped = assertThrows(LarderException.class, () -> larder.build(key, path -> {
            throw sql;
        }));
        assertEquals("build_failed", wrapped.code());
        assertEquals(0, wrapped.status());
        assertSame(sql, wrapped.getCause());
        assertEquals(key, wrapped.details().get("key"));
        assertEquals("unknown_build", assertThrows(LarderException.class, () -> larder.buildInfo(key)).code());

        // the next build() builds again, on a fresh file (CREATE TABLE half_done would fail on the old one)
        AtomicInteger runs = new AtomicInteger();
        assertEquals(key, larder.build(key, path -> {
            runs.incrementAndGet();
            try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + path);
                 Statement s = db.createStatement()) {
                s.executeUpdate("CREATE TABLE half_done (id INTEGER PRIMARY KEY)");
                s.executeUpdate("INSERT INTO half_done(id) VALUES (1), (2)");
            }
        }));
        assertEquals(1, runs.get());
        BuildInfo info = larder.buildInfo(key);
        assertTrue(info.isReady());
        assertEquals(Map.of("half_done", 2L), info.counts());
    }

    @Test
    void aWaiterWhoseBuilderFailsBuildsItself() throws Exception {
        CountDownLatch migrating = new CountDownLatch(1);
        AtomicLong builderFailed = new AtomicLong();
        Future<?> failing = pool.submit(() -> larder.build(key, path -> {
            migrating.countDown();
            Thread.sleep(500);
            builderFailed.set(System.nanoTime());
            throw new IllegalStateException("the first builder's migration failed");
        }));
        assertTrue(migrating.await(10, TimeUnit.SECONDS));

        AtomicInteger runs = new AtomicInteger();
        long waiterStarted = System.nanoTime();
        String answered = larder.build(key, "second builder", Duration.ofSeconds(30), path -> {
            runs.incrementAndGet();
            djangoLikeMigrate(path);
        });
        assertEquals(key, answered);
        assertTrue(waiterStarted < builderFailed.get(), "the second caller started while the first was building");
        assertEquals(1, runs.get(), "the waiter ran its migrate once the builder failed");
        assertTrue(logged("DELETE", "/builds/" + key, 204), "the failed builder discarded the build");
        assertTrue(logged("GET", "/builds/" + key, 404), "the waiter's long poll heard that the build was discarded");

        ExecutionException e = assertThrows(ExecutionException.class, () -> failing.get(30, TimeUnit.SECONDS));
        assertInstanceOf(IllegalStateException.class, e.getCause());
        BuildInfo info = larder.buildInfo(key);
        assertTrue(info.isReady());
        assertEquals(3L, info.counts().get("shop_product"));
    }

    @Test
    void aFinishWhileAConnectionStillWritesIsTriedAgain() throws Exception {
        // migrate returns while a connection of its own still holds a write transaction for 2.5 s:
        // the first finish answers 409 conflict (Retry-After: 1), a later one succeeds
        CountDownLatch closed = new CountDownLatch(1);
        String answered = larder.build(key, path -> {
            Connection db = DriverManager.getConnection("jdbc:sqlite:" + path);
            db.setAutoCommit(false);
            try (Statement s = db.createStatement()) {
                s.executeUpdate("CREATE TABLE late (id INTEGER PRIMARY KEY)");
                s.executeUpdate("INSERT INTO late(id) VALUES (1)");
            }
            pool.submit(() -> {
                try (db) {
                    sleep(2500);
                    db.commit();
                } finally {
                    closed.countDown();
                }
                return null;
            });
        });
        assertEquals(key, answered);
        assertTrue(closed.await(10, TimeUnit.SECONDS));
        assertTrue(logged("POST", "/builds/" + key + "/finish", 409), "the first finish found the connection writing");
        assertTrue(logged("POST", "/builds/" + key + "/finish", 200));
        assertEquals(Map.of("late", 1L), larder.buildInfo(key).counts());
    }

    @Test
    void errors() {
        LarderException unknown = assertThrows(LarderException.class,
                () -> larder.createStore(StoreOptions.create().build("no-such-" + key)));
        assertEquals(404, unknown.status());
        assertEquals("unknown_build", unknown.code());

        AtomicInteger runs = new AtomicInteger();
        LarderException bad = assertThrows(LarderException.class, () -> larder.build("bad key!", path -> runs.incrementAndGet()));
        assertEquals(400, bad.status());
        assertEquals("bad_request", bad.code());
        assertEquals(0, runs.get());
        assertEquals(400, assertThrows(LarderException.class, () -> larder.build("x".repeat(129), path -> runs.incrementAndGet())).status());
        assertEquals(0, runs.get());

        assertEquals("unknown_build", assertThrows(LarderException.class, () -> larder.buildInfo(key)).code());
        assertEquals("unknown_build", assertThrows(LarderException.class, () -> larder.discardBuild(key)).code());
        assertEquals(400, assertThrows(LarderException.class, () -> larder.buildInfo("bad key!")).status());

        // build and template do not go together; timeout_ms goes with build only
        assertEquals(400, assertThrows(LarderException.class,
                () -> larder.createStore(StoreOptions.forTemplate("gallery").build(key))).status());
        assertEquals(400, assertThrows(LarderException.class,
                () -> larder.createStore(StoreOptions.forTemplate("gallery").buildTimeout(Duration.ofSeconds(1)))).status());
    }

    @Test
    void aWaitForAnotherCallersBuildHasADeadline() throws Exception {
        CountDownLatch migrating = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Future<String> builder = pool.submit(() -> larder.build(key, path -> {
            migrating.countDown();
            assertTrue(release.await(30, TimeUnit.SECONDS));
            djangoLikeMigrate(path);
        }));
        try {
            assertTrue(migrating.await(10, TimeUnit.SECONDS));
            long start = System.nanoTime();
            LarderTimeoutException e = assertThrows(LarderTimeoutException.class,
                    () -> larder.build(key, null, Duration.ofMillis(400), path -> fail("the waiter built it")));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(ms >= 350 && ms < 10_000, "gave up after " + ms + " ms");
            assertEquals(408, e.status());
            assertEquals("timeout", e.code());
            assertEquals(key, e.details().get("key"));

            // a store of it: the server's wait runs out too
            LarderException storeWait = assertThrows(LarderException.class,
                    () -> larder.createStore(StoreOptions.create().build(key).buildTimeout(Duration.ofMillis(200))));
            assertEquals(408, storeWait.status());
            assertEquals("timeout", storeWait.code());
        } finally {
            release.countDown();
        }
        assertEquals(key, builder.get(30, TimeUnit.SECONDS));
    }
}
