package dev.larder;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * Runs the sample test classes (src/sample/java) with the JUnit console launcher in a JVM of their own.
 * With test.sh the launcher is its standalone jar ({@code -Dlarder.test.console}) and the samples and
 * the client are test.sh's builds ({@code -Dlarder.test.sample}, {@code -Dlarder.test.client}); under
 * Maven the launcher is run from this JVM's class path (junit-platform-console) and the samples are
 * compiled here.
 */
final class SampleRun {
    /**
     * The variables a sample must not inherit: each test says which it sets. The run prefix's
     * ({@link SharedServer#RUN_VARIABLES}, CI systems' included) are left out too.
     */
    static final List<String> LARDER_VARIABLES = List.of("LARDER_URL", "LARDER_TOKEN", "LARDER_BINARY", "LARDER_FIXTURES",
            "LARDER_ARTIFACTS", "LARDER_MODE", "LARDER_SAMPLE_IDS", "LARDER_SAMPLE_BARRIER", "LARDER_SAMPLE_PEERS", "XDG_CACHE_HOME");

    private static Path compiled;

    private SampleRun() {}

    /** The plain client (without a server inside): test.sh's build, else where this JVM loads it from. */
    static String client() throws Exception {
        String given = System.getProperty("larder.test.client");
        if (given != null) return given;
        return Path.of(Larder.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }

    /** The compiled samples: test.sh's, else src/sample/java compiled now (once). */
    static synchronized String samples() throws Exception {
        String given = System.getProperty("larder.test.sample");
        if (given != null) return given;
        if (compiled == null) {
            Path out = Files.createTempDirectory("larder-samples");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> ShippedServer.deleteTree(out)));
            JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
            List<String> args = new ArrayList<>(List.of("--release", "17", "-encoding", "UTF-8", "-d", out.toString(),
                    "-cp", client() + File.pathSeparator + String.join(File.pathSeparator, junitJars())));
            try (Stream<Path> files = Files.walk(TestServer.repo().resolve("clients/java/src/sample/java"))) {
                files.filter(f -> f.toString().endsWith(".java")).forEach(f -> args.add(f.toString()));
            }
            if (javac.run(null, null, null, args.toArray(new String[0])) != 0) throw new IllegalStateException("the samples do not compile");
            compiled = out;
        }
        return compiled.toString();
    }

    /** The jars of this JVM's class path (under Maven: JUnit's and the rest of the test class path). */
    static List<String> junitJars() {
        return Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.endsWith(".jar") && Files.isRegularFile(Path.of(e)))
                .collect(Collectors.toList());
    }

    /** {@code java OPTIONS <console launcher> --class-path CLASSPATH --select-class CLASS…}. */
    static List<String> command(List<String> javaOptions, String classPath, String... classes) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(javaOptions);
        String console = System.getProperty("larder.test.console");
        if (console != null) {
            cmd.addAll(List.of("-jar", console, "--class-path", classPath));
        } else {
            cmd.addAll(List.of("-cp", classPath + File.pathSeparator + String.join(File.pathSeparator, junitJars()),
                    "org.junit.platform.console.ConsoleLauncher"));
        }
        cmd.addAll(List.of("--disable-banner", "--details=tree", "--disable-ansi-colors", "--include-engine=junit-jupiter"));
        for (String c : classes) cmd.addAll(List.of("--select-class", c));
        return cmd;
    }

    /**
     * Starts {@code cmd} in {@code dir}, its output into {@code output}, with this JVM's environment less
     * {@link #LARDER_VARIABLES}, plus {@code env} (a null value removes the variable).
     */
    static Process start(List<String> cmd, Path dir, Map<String, String> env, Path output) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile())
                .redirectErrorStream(true).redirectOutput(output.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        Map<String, String> e = pb.environment();
        LARDER_VARIABLES.forEach(e::remove);
        for (List<String> pair : SharedServer.RUN_VARIABLES) pair.forEach(e::remove);
        env.forEach((k, v) -> {
            if (v == null) e.remove(k);
            else e.put(k, v);
        });
        return pb.start();
    }

    /** Waits up to {@code seconds} for {@code p}; answers its exit status. */
    static int finish(Process p, long seconds, Path output) throws Exception {
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new AssertionError("the sample run did not finish within " + seconds + " s:\n" + Files.readString(output));
        }
        return p.exitValue();
    }

    /** {@code PATH} without the folders that hold a {@code larder}. */
    static String pathWithoutLarder() {
        String path = System.getenv("PATH");
        return Arrays.stream(path == null ? new String[0] : path.split(File.pathSeparator))
                .filter(d -> !d.isEmpty() && !Files.isExecutable(Path.of(d, "larder")))
                .collect(Collectors.joining(File.pathSeparator));
    }

    /** What each sample JVM recorded (SampleSelfStartTest): its run.properties, by its pid. */
    static Map<Long, Properties> runs(Path ids) throws IOException {
        Map<Long, Properties> runs = new TreeMap<>();
        try (Stream<Path> dirs = Files.list(ids)) {
            for (Path d : dirs.collect(Collectors.toList())) {
                Properties p = new Properties();
                Path file = d.resolve("run.properties");
                if (!Files.isRegularFile(file)) continue;
                try (var in = Files.newBufferedReader(file)) {
                    p.load(in);
                }
                runs.put(Long.parseLong(d.getFileName().toString()), p);
            }
        }
        return runs;
    }

    /** The store ids the sample JVM {@code pid} recorded, by test method. */
    static Map<String, String> storeIds(Path ids, long pid) throws IOException {
        Map<String, String> stores = new TreeMap<>();
        try (Stream<Path> files = Files.list(ids.resolve(Long.toString(pid)))) {
            for (Path f : files.filter(f -> f.toString().endsWith(".id")).collect(Collectors.toList())) {
                String name = f.getFileName().toString();
                stores.put(name.substring(0, name.length() - 3), Files.readString(f).strip());
            }
        }
        return stores;
    }
}
