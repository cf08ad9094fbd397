package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The extension's own server (clients/README.md, "Where a test helper's server comes from"), end to
 * end: sample JVMs (dev.larder.sample.SampleSelfStartTest, two passing tests and one failing on
 * purpose, run by the JUnit console launcher) without LARDER_URL, in a working directory holding a
 * fixtures/ folder (the repository's gallery), with a TMPDIR and java.io.tmpdir of their own.
 */
class SelfStartTest {
    static final String SAMPLE = "dev.larder.sample.SampleSelfStartTest";

    @TempDir
    Path work;
    Path project;
    Path tmp;
    Path ids;
    Path artifacts;

    @BeforeEach
    void project() throws IOException {
        project = Files.createDirectories(work.resolve("project"));
        copyTree(TestServer.fixtures().resolve("gallery"), project.resolve("fixtures").resolve("gallery"));
        tmp = Files.createDirectories(work.resolve("tmp"));
        ids = Files.createDirectories(work.resolve("ids"));
        artifacts = work.resolve("artifacts");
    }

    /** The environment of a sample JVM: no LARDER_URL (SampleRun removes it), this test's TMPDIR. */
    private Map<String, String> env(int peers) {
        Map<String, String> env = new HashMap<>();
        env.put("TMPDIR", tmp.toString());
        env.put("LARDER_ARTIFACTS", artifacts.toString());
        env.put("LARDER_SAMPLE_IDS", ids.toString());
        env.put("LARDER_SAMPLE_BARRIER", work.resolve("barrier").toString());
        env.put("LARDER_SAMPLE_PEERS", Integer.toString(peers));
        return env;
    }

    private List<String> options() {
        return List.of("-Djava.io.tmpdir=" + tmp);
    }

    private static String classPath(String client) throws Exception {
        return client + File.pathSeparator + SampleRun.samples();
    }

    /** Runs {@code count} sample JVMs at once; answers their outputs once all have exited. */
    private List<String> runAtOnce(int count, List<String> cmd, Map<String, String> env) throws Exception {
        List<Process> processes = new ArrayList<>();
        List<Path> outputs = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Path output = work.resolve("launcher-" + processes.size() + "-" + System.nanoTime() + ".out");
            outputs.add(output);
            processes.add(SampleRun.start(cmd, project, env, output));
        }
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int status = SampleRun.finish(processes.get(i), 120, outputs.get(i));
            String out = Files.readString(outputs.get(i));
            assertEquals(1, status, "the launcher exits 1 when a test failed:\n" + out);
            texts.add(out);
        }
        return texts;
    }

    private static void assertSampleResults(String out) {
        assertTrue(out.contains("2 tests successful"), out);
        assertTrue(out.contains("1 tests failed"), out);
        assertTrue(out.contains("this test fails on purpose"), out);
    }

    @Test
    void twoJvmsAtOnceShareOneServerThatStopsAfterThem() throws Exception {
        Map<String, String> env = env(2);
        env.put("LARDER_BINARY", TestServer.binary().toString());
        List<String> outputs = runAtOnce(2, SampleRun.command(options(), classPath(SampleRun.client()), SAMPLE), env);
        Instant ended = Instant.now();
        outputs.forEach(SelfStartTest::assertSampleResults);

        Map<Long, Properties> runs = SampleRun.runs(ids);
        assertEquals(2, runs.size(), "each JVM recorded its run: " + runs);
        Properties a = runs.values().iterator().next();
        // One server: the same URL, process and folder for both, serving both.
        for (Map.Entry<Long, Properties> run : runs.entrySet()) {
            Properties r = run.getValue();
            assertEquals(a.getProperty("url"), r.getProperty("url"), "the URL both used");
            assertEquals(r.getProperty("url"), r.getProperty("server.url"));
            assertEquals(a.getProperty("server.pid"), r.getProperty("server.pid"));
            assertEquals(a.getProperty("folders"), r.getProperty("folders"));
            assertFalse(r.getProperty("folders").contains(","), "one server folder: " + r.getProperty("folders"));
            assertTrue(r.getProperty("folders").startsWith(tmp.toString()), "the server's folder is under TMPDIR: " + r);
            assertEquals(TestServer.binary().toRealPath().toString(), r.getProperty("server.binary"));
            Set<String> serves = Set.of(r.getProperty("server.serves").split(","));
            for (long pid : runs.keySet()) assertTrue(serves.contains(Long.toString(pid)), "the server serves " + pid + ": " + serves);
        }
        // Each test got a store of its own.
        Set<String> stores = new HashSet<>();
        for (long pid : runs.keySet()) {
            Map<String, String> mine = SampleRun.storeIds(ids, pid);
            assertEquals(Set.of("first", "second", "failsOnPurpose"), mine.keySet());
            stores.addAll(mine.values());
            // The failed test kept its store and saved its artifact.
            String failed = mine.get("failsOnPurpose");
            assertTrue(outputs.stream().anyMatch(o -> o.contains("kept store " + failed)), "kept " + failed + ":\n" + outputs);
            Path zip = artifacts.resolve("SampleSelfStartTest.failsOnPurpose-" + failed + ".zip");
            try (ZipFile z = new ZipFile(zip.toFile())) {
                assertNotNull(z.getEntry("store.sqlite"), "store.sqlite in " + zip);
            }
        }
        assertEquals(6, stores.size(), "six tests, six stores: " + stores);
        try (Stream<Path> saved = Files.list(artifacts)) {
            assertEquals(2, saved.count(), "only the failed tests leave artifacts");
        }

        double seconds = secondsUntilGone(a, ended);
        System.out.printf("SelfStartTest: the shared server was gone, its folder removed, %.2f s after the JVMs exited%n", seconds);
        assertTrue(seconds < 4, "the server outlived its JVMs by " + seconds + " s");
    }

    @Test
    void theJarCarriesTheServerUnpackedOncePerVersion() throws Exception {
        String jar = System.getProperty("larder.test.jar");
        assumeTrue(jar != null, "-Dlarder.test.jar names no packed jar (test.sh makes one with package.sh)");
        Path cache = work.resolve("cache");
        Map<String, String> env = env(2);
        env.put("XDG_CACHE_HOME", cache.toString());
        env.put("PATH", SampleRun.pathWithoutLarder());
        List<String> cmd = SampleRun.command(options(), classPath(jar), SAMPLE);

        // Two JVMs at once, both with an empty cache: they race to unpack; one copy stays.
        List<String> outputs = runAtOnce(2, cmd, env);
        Instant ended = Instant.now();
        outputs.forEach(SelfStartTest::assertSampleResults);
        String version = Files.readString(TestServer.repo().resolve("VERSION")).strip();
        Path unpacked = cache.resolve("larder").resolve(version).resolve(ShippedServer.platform());
        Path binary = unpacked.resolve("larder");
        assertTrue(Files.isExecutable(binary), binary + " is unpacked");
        assertEquals(List.of(ShippedServer.platform()), names(unpacked.getParent()), "nothing else is left in the cache");
        Map<Long, Properties> runs = SampleRun.runs(ids);
        assertEquals(2, runs.size());
        for (Properties r : runs.values()) {
            assertEquals(binary.toRealPath().toString(), r.getProperty("server.binary"), "the unpacked server runs");
            assertEquals(runs.values().iterator().next().getProperty("url"), r.getProperty("url"));
        }
        BasicFileAttributes before = Files.readAttributes(binary, BasicFileAttributes.class);
        secondsUntilGone(runs.values().iterator().next(), ended);

        // A second run starts the server from the copy unpacked before.
        Path ids2 = Files.createDirectories(work.resolve("ids2"));
        env.put("LARDER_SAMPLE_IDS", ids2.toString());
        env.put("LARDER_SAMPLE_PEERS", "1");
        env.put("LARDER_SAMPLE_BARRIER", work.resolve("barrier2").toString());
        assertSampleResults(runAtOnce(1, cmd, env).get(0));
        Properties again = SampleRun.runs(ids2).values().iterator().next();
        assertEquals(binary.toRealPath().toString(), again.getProperty("server.binary"));
        BasicFileAttributes after = Files.readAttributes(binary, BasicFileAttributes.class);
        assertEquals(before.fileKey(), after.fileKey(), "the same file: not unpacked again");
        assertEquals(before.lastModifiedTime(), after.lastModifiedTime());
        assertEquals(List.of(ShippedServer.platform()), names(unpacked.getParent()));
        secondsUntilGone(again, Instant.now());
    }

    @Test
    void noUrlAndNoBinaryFailsWithOneSentence() throws Exception {
        Map<String, String> env = env(1);
        env.put("PATH", SampleRun.pathWithoutLarder());
        env.put("XDG_CACHE_HOME", work.resolve("cache").toString());
        Path output = work.resolve("launcher.out");
        // The plain client: no server inside.
        Process p = SampleRun.start(SampleRun.command(options(), classPath(SampleRun.client()), SAMPLE), project, env, output);
        int status = SampleRun.finish(p, 60, output);
        String out = Files.readString(output);
        assertEquals(1, status, out);
        assertTrue(out.contains("3 tests failed"), out);
        assertTrue(out.contains("ParameterResolutionException: " + SharedServer.NO_SERVER + "\n"), out);
        assertFalse(Files.exists(work.resolve("cache")), "nothing was unpacked");
    }

    @Test
    void aSurefireForkServesMavenSoForksOneAfterAnotherShareTheServer() throws Exception {
        Map<String, String> env = env(1);
        env.put("LARDER_BINARY", TestServer.binary().toString());
        List<String> forkOptions = new ArrayList<>(options());
        forkOptions.add("-Dsurefire.test.class.path=" + work.resolve("not-a-real-class-path"));
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dmaven.home=" + work.resolve("not-maven"),
                "-cp", Path.of(FakeMaven.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString(),
                FakeMaven.class.getName()));
        cmd.addAll(SampleRun.command(forkOptions, classPath(SampleRun.client()), SAMPLE));
        Path output = work.resolve("maven.out");
        Process maven = SampleRun.start(cmd, project, env, output);
        assertEquals(0, SampleRun.finish(maven, 180, output));
        Instant ended = Instant.now();
        String out = Files.readString(output);
        assertEquals(2, out.split("2 tests successful", -1).length - 1, "two forks ran:\n" + out);

        Map<Long, Properties> runs = SampleRun.runs(ids);
        assertEquals(2, runs.size(), "each fork recorded its run: " + runs);
        Properties first = runs.values().iterator().next();
        for (Properties r : runs.values()) {
            // The second fork started 1.5 s after the first ended: the server was kept for Maven's JVM.
            assertEquals(first.getProperty("url"), r.getProperty("url"));
            assertEquals(first.getProperty("server.pid"), r.getProperty("server.pid"));
            Set<String> serves = Set.of(r.getProperty("server.serves").split(","));
            assertTrue(serves.contains(Long.toString(maven.pid())), "the server serves Maven's JVM " + maven.pid() + ": " + serves);
            assertTrue(serves.contains(r.getProperty("pid")), "and the fork: " + serves);
        }
        double seconds = secondsUntilGone(first, ended);
        assertTrue(seconds < 4, "the server outlived Maven's JVM by " + seconds + " s");
    }

    /**
     * Waits (up to 10 s) until the server of {@code run} has stopped (its process gone, its port closed)
     * and its folder is removed; answers the seconds since {@code since}.
     */
    static double secondsUntilGone(Properties run, Instant since) throws Exception {
        long pid = Long.parseLong(run.getProperty("server.pid"));
        Path folder = Path.of(run.getProperty("folders"));
        URI url = URI.create(run.getProperty("url"));
        Instant deadline = Instant.now().plusSeconds(10);
        while (true) {
            if (!running(pid) && !Files.exists(folder) && !listening(url)) {
                return Duration.between(since, Instant.now()).toMillis() / 1000.0;
            }
            if (Instant.now().isAfter(deadline)) {
                throw new AssertionError("the server " + pid + " (" + url + ", " + folder + ") is still there 10 s after its processes ended: running "
                        + running(pid) + ", folder " + Files.exists(folder));
            }
            Thread.sleep(20);
        }
    }

    /** The process runs (a zombie, not reaped by whoever adopted it, does not). */
    static boolean running(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            return stat.charAt(stat.lastIndexOf(')') + 2) != 'Z';
        } catch (IOException e) {
            return false;
        }
    }

    static boolean listening(URI url) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(url.getHost(), url.getPort()), 200);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    static List<String> names(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            return files.map(f -> f.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> paths = Files.walk(from)) {
            for (Path p : paths.collect(Collectors.toList())) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) Files.createDirectories(target);
                else Files.copy(p, target);
            }
        }
    }
}
