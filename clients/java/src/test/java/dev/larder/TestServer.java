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
 * A real Larder server for the tests: {@code $LARDER_BINARY serve --port 0 --root <new dir>
 * --fixtures $LARDER_FIXTURES}, stopped with SIGTERM.
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
        String binary = System.getenv("LARDER_BINARY");
        String fixtures = System.getenv("LARDER_FIXTURES");
        if (binary == null || binary.isBlank()) throw new IllegalStateException("LARDER_BINARY is not set (run clients/java/test.sh BINARY)");
        if (fixtures == null || fixtures.isBlank()) throw new IllegalStateException("LARDER_FIXTURES is not set");
        Path dir = Files.createTempDirectory("larder-java-test");
        Path root = dir.resolve("root"); // must not exist yet
        Path stderr = dir.resolve("server.stderr");
        List<String> cmd = new ArrayList<>(List.of(binary, "serve", "--port", "0", "--root", root.toString(),
                "--fixtures", fixtures));
        cmd.addAll(List.of(extraArgs));
        Process p = new ProcessBuilder(cmd)
                .redirectError(stderr.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .start();
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
