package dev.larder;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A real Larder server for the tests: {@code BINARY serve --port 0 --root <new dir> --fixtures FIXTURES},
 * stopped with SIGTERM. BINARY is {@link #binary()}, FIXTURES {@link #fixtures()}. {@link #startHidden} runs it
 * through the repository's {@code Tests/support/hidden-larder}, so that this process cannot open its files.
 */
final class TestServer {
    final Process process;
    final String url;
    final Path root;
    final Path stderr;

    private TestServer(Process process, String url, Path root, Path stderr) {
        this.process = process;
        this.url = url;
        this.root = root;
        this.stderr = stderr;
    }

    static TestServer start(String... extraArgs) throws Exception {
        return start(false, extraArgs);
    }

    /**
     * A server whose files this process cannot see: {@code Tests/support/hidden-larder serve ...} with
     * {@code LARDER_HIDDEN_BINARY} = {@link #binary()}: a tmpfs of its own mount namespace over the folder
     * of its root. The store's {@code path} it answers does not exist here; HTTP on loopback works.
     */
    static TestServer startHidden(String... extraArgs) throws Exception {
        return start(true, extraArgs);
    }

    private static TestServer start(boolean hidden, String... extraArgs) throws Exception {
        String binary = binary().toString();
        String fixtures = fixtures().toString();
        Path dir = Files.createTempDirectory("larder-java-test");
        Path root = dir.resolve("root"); // must not exist yet
        Path stderr = dir.resolve("server.stderr");
        List<String> cmd = new ArrayList<>(List.of(hidden ? repo().resolve("Tests/support/hidden-larder").toString() : binary,
                "serve", "--port", "0", "--root", root.toString(), "--fixtures", fixtures));
        cmd.addAll(List.of(extraArgs));
        ProcessBuilder pb = new ProcessBuilder(cmd)
                .redirectError(stderr.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        if (hidden) pb.environment().put("LARDER_HIDDEN_BINARY", binary);
        Process p = pb.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> first = CompletableFuture.supplyAsync(() -> {
            try {
                return out.readLine();
            } catch (IOException e) {
                return null;
            }
        });
        String line;
        try {
            line = first.get(20, TimeUnit.SECONDS);
        } catch (Exception e) {
            p.destroyForcibly();
            throw new IllegalStateException("the server did not say where it listens: " + e + "\n" + tail(stderr), e);
        }
        String prefix = "larder listening on ";
        if (line == null || !line.startsWith(prefix)) {
            p.destroyForcibly();
            throw new IllegalStateException("unexpected first line from the server: " + line + "\n" + tail(stderr));
        }
        // Keep reading stdout so the server never blocks on a full pipe.
        Thread drain = new Thread(() -> {
            try {
                while (out.readLine() != null) { /* discard */ }
            } catch (IOException ignored) {
                // server gone
            }
        }, "larder-stdout");
        drain.setDaemon(true);
        drain.start();
        return new TestServer(p, line.substring(prefix.length()).trim(), root, stderr);
    }

    /** The repository: {@code -Dlarder.test.repo} (test.sh sets it), else two folders up from the working directory (Maven's: clients/java). */
    static Path repo() {
        String given = System.getProperty("larder.test.repo");
        return (given != null ? Path.of(given) : Path.of("..", "..")).toAbsolutePath().normalize();
    }

    /** The repository's fixtures: {@code LARDER_FIXTURES}, else {@code fixtures/} of {@link #repo()}. */
    static Path fixtures() {
        String given = System.getenv("LARDER_FIXTURES");
        return given != null && !given.isBlank() ? Path.of(given).toAbsolutePath() : repo().resolve("fixtures");
    }

    /**
     * The server binary the tests run: {@code LARDER_BINARY} (test.sh sets it), else {@code -Dlarder.binary},
     * else {@code larder} on PATH, else the repository's own build ({@code .build/release} or {@code .build/debug}).
     */
    static Path binary() {
        String given = System.getenv("LARDER_BINARY");
        if (given == null || given.isBlank()) given = System.getProperty("larder.binary");
        if (given != null && !given.isBlank()) return Path.of(given).toAbsolutePath();
        Path onPath = SharedServer.onPath("larder");
        if (onPath != null) return onPath;
        for (String build : List.of("release", "debug")) {
            Path built = repo().resolve(".build").resolve(build).resolve("larder");
            if (Files.isExecutable(built)) return built;
        }
        throw new IllegalStateException("no larder binary for the tests: set LARDER_BINARY (clients/java/test.sh BINARY does), "
                + "put larder on PATH, or build it (swift build) in " + repo());
    }

    static String tail(Path file) {
        try {
            String s = Files.readString(file);
            return s.length() > 2000 ? s.substring(s.length() - 2000) : s;
        } catch (IOException e) {
            return "(no stderr: " + e + ")";
        }
    }

    void close() throws InterruptedException {
        process.destroy(); // SIGTERM
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(5, TimeUnit.SECONDS);
        }
        // The server's root and stderr live in one temporary directory: remove it.
        try (var paths = Files.walk(root.getParent())) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // best effort
        }
    }
}
