// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The server a test run uses, as every Larder test helper finds it (clients/README.md, "Where a test
 * helper's server comes from"); {@link dev.larder.junit.LarderExtension} and
 * {@link dev.larder.junit.LarderSnapshots} use it, and so can the helpers of other test frameworks.
 *
 * <ol>
 *   <li>A URL, when one is given: the system property {@code larder.url}, else {@code LARDER_URL}. That
 *       server is used and nothing is started.</li>
 *   <li>Otherwise a server is started, once per JVM, by running
 *       {@code BINARY up --for PID [--for MAVEN_PID] [--fixtures DIR]} in the working directory, and
 *       the URL it prints is used. {@code PID} is this JVM; {@code MAVEN_PID} is Maven's JVM when this
 *       one is a Surefire or Failsafe fork, so that forks started one after another keep one server.
 *       A {@code larder up} that exits non-zero is run again, up to three runs 0.2 s and 0.5 s apart;
 *       a failure is not kept: the next call runs it anew.
 *       {@code BINARY} is, in this order: {@code -Dlarder.binary}, {@code LARDER_BINARY}, the server the
 *       jar carries for this platform (linux-x86_64), {@code larder} on {@code PATH}. {@code DIR} is
 *       {@code -Dlarder.fixtures}; without it {@code larder up} takes {@code LARDER_FIXTURES}, else the
 *       project's {@code fixtures/} (or {@code tests/fixtures} …).</li>
 *   <li>Neither: a {@link LarderException} saying {@link #NO_SERVER}.</li>
 * </ol>
 *
 * <p>{@code larder up} shares the server among every process of the run (parallel forks included) and
 * stops it a second after the last one ends, removing its stores.
 *
 * <p>It also says how a helper labels the store it makes for a test (clients/README.md, "How a test helper
 * labels its stores"): {@link #label(String, String)}, {@code RUN/PACKAGE/TEST}, with {@code RUN} from
 * {@link #run()}.
 */
public final class SharedServer {
    /** What the helpers say when there is neither a URL nor a binary (the same in every client). */
    public static final String NO_SERVER = "Larder: no server to use: set LARDER_URL to a running server's URL, "
            + "or install the larder binary (set LARDER_BINARY to it, or put it on PATH)";

    /** The system property that names the run prefix of the labels ({@link #run()}); it wins over the variables. */
    public static final String RUN_PROPERTY = "larder.run";

    /**
     * Where the run prefix comes from without {@code -Dlarder.run} (shared with the other clients:
     * clients/defaults.json {@code run_variables}): the first {@code [variable, only when this one is set too]}
     * pair whose variables are both non-empty; an empty second name is no condition. {@code LARDER_RUN}, then
     * the run ids of GitHub Actions, GitLab CI, Buildkite, Jenkins and CircleCI.
     */
    public static final List<List<String>> RUN_VARIABLES = List.of(
            List.of("LARDER_RUN", ""),
            List.of("GITHUB_RUN_ID", "GITHUB_ACTIONS"),
            List.of("CI_PIPELINE_ID", "GITLAB_CI"),
            List.of("BUILDKITE_BUILD_ID", "BUILDKITE"),
            List.of("BUILD_TAG", "JENKINS_URL"),
            List.of("CIRCLE_WORKFLOW_ID", "CIRCLECI"));

    /** The longest label the server takes (shared with the other clients): a longer one is cut to it. */
    public static final int LABEL_MAX_BYTES = 256;

    /** How long {@code larder up} may take (it gives up on a server that does not listen within 60 s). */
    static final long UP_TIMEOUT_SECONDS = 120;

    /**
     * The pauses before running a {@code larder up} that exited non-zero again, within one call: one that
     * joins a server as it stops can fail, and a moment later it starts a new one (issue 43).
     */
    static final long[] UP_RETRY_DELAYS_MS = {200, 500};

    private static final Object LOCK = new Object();
    private static Larder started;
    private static Larder given;
    private static String givenFor;

    private SharedServer() {}

    /**
     * The client of this run's server: the given URL's, else the one started for this JVM (starting it on
     * the first call, and on every later one until it started), with {@code LARDER_TOKEN}. Thread-safe.
     *
     * @throws LarderException when there is neither a URL nor a binary ({@link #NO_SERVER}), or
     *                         {@code larder up} fails (its standard error in the message)
     */
    public static Larder client() {
        String url = givenUrl();
        synchronized (LOCK) {
            if (url != null) {
                if (given == null || !url.equals(givenFor)) {
                    given = new Larder(url, System.getenv("LARDER_TOKEN"));
                    givenFor = url;
                }
                return given;
            }
            // A failure is not kept: the next test runs `larder up` again.
            if (started == null) {
                started = new Larder(up(binary(), servedPids(), setting("larder.fixtures", null)), System.getenv("LARDER_TOKEN"));
            }
            return started;
        }
    }

    /** The URL of {@link #client()}. */
    public static String url() {
        return client().url();
    }

    /**
     * This run's label prefix: {@code -Dlarder.run}, else the first of {@link #RUN_VARIABLES} that is set in
     * the environment (with its condition variable); null when there is none.
     */
    public static String run() {
        return run(System.getProperty(RUN_PROPERTY), System.getenv());
    }

    /**
     * {@link #run()} of an option and an environment: {@code option} when it is not null or blank, else the
     * value of the first {@link #RUN_VARIABLES} pair whose variable and condition variable (when it names
     * one) are both set and not blank in {@code environment}, else null. Values are trimmed.
     */
    public static String run(String option, Map<String, String> environment) {
        if (option != null && !option.isBlank()) return option.strip();
        for (List<String> pair : RUN_VARIABLES) {
            String value = environment.get(pair.get(0));
            if (value == null || value.isBlank()) continue;
            String condition = pair.get(1);
            if (!condition.isEmpty()) {
                String set = environment.get(condition);
                if (set == null || set.isBlank()) continue;
            }
            return value.strip();
        }
        return null;
    }

    /**
     * The label of the store a helper makes for the test {@code test} of {@code packageName}, in this run:
     * {@link #label(String, String, String)} with {@link #run()}. For a JUnit test, {@code packageName} is the
     * test class's fully qualified name ({@code com.acme.shop.OrdersTest}, a nested class with {@code $})
     * and {@code test} the method's name.
     */
    public static String label(String packageName, String test) {
        return label(run(), packageName, test);
    }

    /**
     * {@code RUN/PACKAGE/TEST}, or {@code PACKAGE/TEST} when {@code run} is null or empty, cut to
     * {@link #LABEL_MAX_BYTES} bytes of UTF-8 ({@link #cut}).
     */
    public static String label(String run, String packageName, String test) {
        String label = packageName + "/" + test;
        if (run != null && !run.isEmpty()) label = run + "/" + label;
        return cut(label, LABEL_MAX_BYTES);
    }

    /**
     * {@code text} when its UTF-8 takes at most {@code maxBytes} bytes, else its longest start that does,
     * ending at a character boundary (a character is never split).
     */
    public static String cut(String text, int maxBytes) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        if (bytes.length <= maxBytes) return text;
        int end = Math.max(0, maxBytes);
        // A byte 10xxxxxx continues a character: back up to the first byte of the one that does not fit.
        while (end > 0 && (bytes[end] & 0xC0) == 0x80) end--;
        return new String(bytes, 0, end, StandardCharsets.UTF_8);
    }

    /** {@code -Dlarder.url}, else {@code LARDER_URL}; null when neither is set (or both are blank). */
    static String givenUrl() {
        return setting("larder.url", "LARDER_URL");
    }

    private static String setting(String property, String variable) {
        String v = System.getProperty(property);
        if (v != null && !v.isBlank()) return v.trim();
        v = variable == null ? null : System.getenv(variable);
        return v != null && !v.isBlank() ? v.trim() : null;
    }

    /** A binary to run and where it came from (for messages). */
    record Binary(String path, String from) {}

    /**
     * {@code -Dlarder.binary}, {@code LARDER_BINARY}, the jar's own (unpacked), {@code larder} on
     * {@code PATH}.
     *
     * @throws LarderException ({@link #NO_SERVER}) when there is none
     */
    static Binary binary() {
        String given = System.getProperty("larder.binary");
        if (given != null && !given.isBlank()) return new Binary(absolute(given.trim()), "-Dlarder.binary");
        given = System.getenv("LARDER_BINARY");
        if (given != null && !given.isBlank()) return new Binary(absolute(given.trim()), "LARDER_BINARY");
        Path shipped = ShippedServer.binary();
        if (shipped != null) return new Binary(shipped.toString(), "the larder-client jar");
        Path onPath = onPath("larder");
        if (onPath != null) return new Binary(onPath.toString(), "PATH");
        throw new LarderException(0, "no_server", NO_SERVER, null);
    }

    /** A path with a separator is made absolute (against the working directory); a bare name is left to PATH. */
    private static String absolute(String binary) {
        return binary.contains(File.separator) ? Path.of(binary).toAbsolutePath().toString() : binary;
    }

    /** The first executable {@code name} in a folder of {@code PATH}, or null. */
    static Path onPath(String name) {
        String path = System.getenv("PATH");
        if (path == null) return null;
        for (String dir : path.split(File.pathSeparator)) {
            if (dir.isEmpty()) continue;
            Path candidate = Path.of(dir, name);
            if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) return candidate.toAbsolutePath();
        }
        return null;
    }

    /** This JVM, and Maven's when this is one of its Surefire/Failsafe forks. */
    static List<Long> servedPids() {
        List<Long> pids = new ArrayList<>(List.of(ProcessHandle.current().pid()));
        mavenRunner().ifPresent(p -> pids.add(p.pid()));
        return pids;
    }

    /**
     * Maven's JVM, when this JVM is a Surefire or Failsafe fork of it: it lives for the whole build, so
     * forks started one after another share one server. A fork is told by the system properties its
     * booter sets ({@code surefire.test.class.path}, {@code surefire.real.class.path}) or its main
     * class; Maven's JVM is the nearest ancestor that is a {@code java} running Maven's launcher
     * (classworlds); Surefire starts a fork through {@code /bin/sh -c}. A Maven daemon's ({@code mvnd})
     * is not taken, as it outlives the build; nor is any other runner (a Gradle daemon lives for hours:
     * a Gradle worker registers itself only).
     */
    static Optional<ProcessHandle> mavenRunner() {
        if (!isSurefireFork(System.getProperty("sun.java.command", ""),
                System.getProperty("surefire.test.class.path"), System.getProperty("surefire.real.class.path"))) {
            return Optional.empty();
        }
        Optional<ProcessHandle> p = ProcessHandle.current().parent();
        for (int depth = 0; depth < 4 && p.isPresent(); depth++, p = p.get().parent()) {
            ProcessHandle.Info info = p.get().info();
            String command = info.command().orElse("");
            String name = Path.of(command.isEmpty() ? "-" : command).getFileName().toString();
            if (name.equals("java") || name.equals("java.exe")) {
                return isMaven(String.join(" ", info.arguments().orElse(new String[0]))) ? p : Optional.empty();
            }
        }
        return Optional.empty();
    }

    /** This JVM is a Surefire/Failsafe fork, by its booter's properties or its main class. */
    static boolean isSurefireFork(String javaCommand, String testClassPath, String realClassPath) {
        return testClassPath != null || realClassPath != null
                || javaCommand.startsWith("org.apache.maven.surefire.booter.ForkedBooter")
                || javaCommand.matches("\\S*surefirebooter[^/\\s]*\\.jar(\\s.*)?");
    }

    /** The arguments of Maven's own JVM (its classworlds launcher), and not of a Maven daemon's. */
    static boolean isMaven(String arguments) {
        boolean maven = arguments.contains("org.codehaus.plexus.classworlds.launcher.Launcher")
                || arguments.contains("-Dmaven.home=") || arguments.contains("-Dclassworlds.conf=");
        return maven && !arguments.contains("mvnd");
    }

    /**
     * Runs {@code binary up --for PID … [--fixtures DIR]} in the working directory and answers the URL
     * it prints; one that exits non-zero is run again after each of {@link #UP_RETRY_DELAYS_MS}.
     *
     * @throws LarderException when it cannot run, fails (its last run's standard error in the message) or
     *                         prints no URL; {@code details().get("attempts")} is how many runs it took
     */
    static String up(Binary binary, List<Long> pids, String fixtures) {
        List<String> command = new ArrayList<>(List.of(binary.path(), "up"));
        for (long pid : pids) command.addAll(List.of("--for", Long.toString(pid)));
        if (fixtures != null) command.addAll(List.of("--fixtures", Path.of(fixtures).toAbsolutePath().toString()));
        String shown = String.join(" ", command);
        for (int attempt = 1; ; attempt++) {
            Map<String, Object> details = Map.of("attempts", attempt);
            Run run = runUp(binary, command, details);
            if (run.status() == 0) {
                String[] lines = run.stdout().split("\n");
                String url = lines[lines.length - 1].strip();
                if (!url.startsWith("http://") && !url.startsWith("https://")) {
                    throw new LarderException(0, "up_failed", "Larder: `" + shown + "` printed no URL: "
                            + (run.stdout().isEmpty() ? "(nothing)" : run.stdout()) + (run.stderr().isEmpty() ? "" : "\n" + run.stderr()), details);
                }
                return url;
            }
            // Only an exit status says it could not start a server this time: try again a moment later.
            if (attempt > UP_RETRY_DELAYS_MS.length) {
                throw new LarderException(0, "up_failed", "Larder: `" + shown + "` (" + binary.from()
                        + ") failed with exit status " + run.status() + ": " + (run.stderr().isEmpty() ? "(nothing on standard error)" : run.stderr()), details);
            }
            try {
                Thread.sleep(UP_RETRY_DELAYS_MS[attempt - 1]);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LarderException(0, "up_failed", "Larder: interrupted while waiting for `" + shown + "`", details, e);
            }
        }
    }

    /** One run of {@code larder up}: its exit status and what it printed (stripped). */
    private record Run(int status, String stdout, String stderr) {}

    /**
     * Runs {@code command} once.
     *
     * @throws LarderException ({@code details}) when it cannot run, does not finish in time or is interrupted
     */
    private static Run runUp(Binary binary, List<String> command, Map<String, Object> details) {
        Path out = null;
        Path err = null;
        try {
            // Files, not pipes: nothing `larder up` leaves running can hold them open on us.
            out = Files.createTempFile("larder-up-", ".out");
            err = Files.createTempFile("larder-up-", ".err");
            Process p;
            try {
                p = new ProcessBuilder(command)
                        .redirectOutput(out.toFile())
                        .redirectError(err.toFile())
                        .start();
                p.getOutputStream().close(); // nothing on its standard input
            } catch (IOException e) {
                throw new LarderException(0, "up_failed", "Larder: could not run " + binary.path() + " (from "
                        + binary.from() + "): " + e.getMessage(), details, e);
            }
            boolean done;
            try {
                done = p.waitFor(UP_TIMEOUT_SECONDS, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
                throw new LarderException(0, "up_failed", "Larder: interrupted while waiting for `" + String.join(" ", command) + "`", details, e);
            }
            if (!done) {
                p.destroyForcibly();
                throw new LarderException(0, "up_failed", "Larder: `" + String.join(" ", command) + "` did not finish within "
                        + UP_TIMEOUT_SECONDS + " s: " + Files.readString(err, StandardCharsets.UTF_8).strip(), details);
            }
            return new Run(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8).strip(),
                    Files.readString(err, StandardCharsets.UTF_8).strip());
        } catch (IOException e) {
            throw new LarderException(0, "up_failed", "Larder: could not run `" + String.join(" ", command) + "`: " + e, details, e);
        } finally {
            for (Path f : new Path[] {out, err}) {
                if (f == null) continue;
                try {
                    Files.deleteIfExists(f);
                } catch (IOException ignored) {
                    // best effort
                }
            }
        }
    }
}
