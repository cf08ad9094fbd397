package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Test runs back to back (issue 43): rounds of two JVMs at once ({@link UpChild}, each getting the helpers' server
 * through {@code larder up} and making a store), each round right after the last one's JVMs ended, with a TMPDIR
 * of their own. Every JVM gets its store, whether it joins the server running, one stopping, or none.
 */
class BackToBackTest {
    /**
     * How long each round waits after the last one's JVMs ended: their {@code larder up} runs about a tenth of a
     * second later, across the moment the server they leave stops (a second after them), so that some rounds
     * join it as it stops.
     */
    static final long[] ROUND_GAPS_MS = {0, 850, 950, 1025, 1100, 1200, 0};

    @TempDir
    Path work;

    @Test
    void everyJvmGetsItsStoreWhileTheServerStopsBetweenRounds() throws Exception {
        Path tmp = Files.createDirectories(work.resolve("tmp"));
        Path project = Files.createDirectories(work.resolve("project"));
        String classPath = SampleRun.client() + File.pathSeparator
                + Path.of(UpChild.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<String> cmd = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Djava.io.tmpdir=" + tmp, "-cp", classPath, UpChild.class.getName());
        Map<String, String> env = new HashMap<>();
        env.put("TMPDIR", tmp.toString());
        env.put("LARDER_BINARY", TestServer.binary().toString());
        Set<String> urls = new HashSet<>();
        long ended = System.nanoTime();
        for (int round = 0; round < ROUND_GAPS_MS.length; round++) {
            long wait = ended + ROUND_GAPS_MS[round] * 1_000_000 - System.nanoTime();
            if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            List<Process> children = new ArrayList<>();
            List<Path> outputs = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Path output = work.resolve("round-" + round + "-" + i + ".out");
                outputs.add(output);
                children.add(SampleRun.start(cmd, project, env, output));
            }
            for (int i = 0; i < 2; i++) {
                int status = SampleRun.finish(children.get(i), 60, outputs.get(i));
                String out = Files.readString(outputs.get(i));
                assertEquals(0, status, "round " + round + ", JVM " + i + ":\n" + out);
                assertTrue(out.startsWith("child: http://"), out);
                urls.add(out.split(" ")[1]);
            }
            ended = System.nanoTime();
        }
        // The last server stops too, its folder removed.
        Instant deadline = Instant.now().plusSeconds(5);
        while (true) {
            // ${TMPDIR}/larder-UID/KEY: what a server keeps there.
            List<Path> left = new ArrayList<>();
            try (Stream<Path> users = Files.list(tmp)) {
                for (Path user : (Iterable<Path>) users::iterator) {
                    try (Stream<Path> folders = Files.list(user)) {
                        folders.forEach(left::add);
                    }
                }
            }
            if (left.isEmpty()) break;
            assertTrue(Instant.now().isBefore(deadline), "5 s after the last round, left: " + left);
            Thread.sleep(50);
        }
        System.out.printf("BackToBackTest: %d rounds of two JVMs back to back, %d servers%n", ROUND_GAPS_MS.length, urls.size());
    }
}
