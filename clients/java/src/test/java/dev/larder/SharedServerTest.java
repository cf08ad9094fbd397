package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How a test helper finds its server (SharedServer), in this JVM; SelfStartTest runs it in others. */
class SharedServerTest {
    static final long SELF = ProcessHandle.current().pid();

    @Test
    void aGivenUrlIsUsedAndNothingStarts() {
        String before = System.getProperty("larder.url");
        System.setProperty("larder.url", "http://127.0.0.1:9/");
        try {
            Larder larder = SharedServer.client();
            assertEquals("http://127.0.0.1:9", larder.url());
            assertSame(larder, SharedServer.client(), "one client for the JVM");
        } finally {
            if (before == null) System.clearProperty("larder.url");
            else System.setProperty("larder.url", before);
        }
    }

    @Test
    void theOneSentence() {
        assertEquals("Larder: no server to use: set LARDER_URL to a running server's URL, or install the larder binary "
                + "(set LARDER_BINARY to it, or put it on PATH)", SharedServer.NO_SERVER);
    }

    @Test
    void aFailingUpGivesItsStandardError() throws Exception {
        SharedServer.Binary binary = new SharedServer.Binary(TestServer.binary().toString(), "the test");
        LarderException e = assertThrows(LarderException.class, () -> SharedServer.up(binary, List.of(SELF), "/nonexistent/fixtures"));
        assertEquals("up_failed", e.code());
        assertEquals(0, e.status());
        assertTrue(e.getMessage().contains("exit status 2"), e.getMessage());
        assertTrue(e.getMessage().contains("larder up: the fixtures folder /nonexistent/fixtures does not exist"), e.getMessage());

        e = assertThrows(LarderException.class, () -> SharedServer.up(binary, List.of(999_999_999L), null));
        assertTrue(e.getMessage().contains("no process 999999999 runs to serve"), e.getMessage());
    }

    @Test
    void aBinaryThatIsNotThereCannotRun(@TempDir Path dir) {
        String missing = dir.resolve("larder").toString();
        LarderException e = assertThrows(LarderException.class,
                () -> SharedServer.up(new SharedServer.Binary(missing, "LARDER_BINARY"), List.of(SELF), null));
        assertEquals("up_failed", e.code());
        assertTrue(e.getMessage().startsWith("Larder: could not run " + missing + " (from LARDER_BINARY): "), e.getMessage());
        assertEquals(1, e.details().get("attempts"), "not run again");
    }

    /**
     * A {@code larder} that logs each run's arguments to {@code $0.ran} and fails its first {@code fails} runs
     * (saying which on stderr), then prints {@code answer} and exits 0.
     */
    static SharedServer.Binary scripted(Path dir, int fails, String answer) throws IOException {
        Path script = dir.resolve("larder");
        Files.writeString(script, "#!/bin/sh\n"
                + "echo \"$*\" >> \"$0.ran\"\n"
                + "runs=$(wc -l < \"$0.ran\")\n"
                + "if [ \"$runs\" -le " + fails + " ]; then echo \"scripted larder: failure $runs\" >&2; exit 2; fi\n"
                + "echo '" + answer + "'\n");
        script.toFile().setExecutable(true);
        return new SharedServer.Binary(script.toString(), "the test");
    }

    static List<String> runs(SharedServer.Binary binary) throws IOException {
        Path ran = Path.of(binary.path() + ".ran");
        return Files.exists(ran) ? Files.readAllLines(ran) : List.of();
    }

    @Test
    void aFailedUpIsRunAgain(@TempDir Path dir) throws Exception {
        SharedServer.Binary binary = scripted(dir, 1, "http://127.0.0.1:9");
        assertEquals("http://127.0.0.1:9", SharedServer.up(binary, List.of(SELF), null));
        assertEquals(List.of("up --for " + SELF, "up --for " + SELF), runs(binary));
    }

    @Test
    void aFailedUpIsTriedThreeTimesWithWhatItsLastRunSaid(@TempDir Path dir) throws Exception {
        SharedServer.Binary binary = scripted(dir, 1000, "http://127.0.0.1:9");
        LarderException e = assertThrows(LarderException.class, () -> SharedServer.up(binary, List.of(SELF), null));
        assertEquals("Larder: `" + binary.path() + " up --for " + SELF + "` (the test) failed with exit status 2: scripted larder: failure 3",
                e.getMessage());
        assertEquals(3, e.details().get("attempts"));
        assertEquals(3, runs(binary).size());
    }

    @Test
    void anAnswerThatIsNoUrlIsNotRunAgain(@TempDir Path dir) throws Exception {
        SharedServer.Binary binary = scripted(dir, 0, "ready");
        LarderException e = assertThrows(LarderException.class, () -> SharedServer.up(binary, List.of(SELF), null));
        assertTrue(e.getMessage().endsWith("printed no URL: ready"), e.getMessage());
        assertEquals(1, e.details().get("attempts"));
        assertEquals(1, runs(binary).size());
    }

    @Test
    void aFailureIsNotKeptForTheJvm(@TempDir Path dir) throws Exception {
        assumeTrue(System.getenv("LARDER_URL") == null && System.getProperty("larder.url") == null, "a URL is given");
        SharedServer.Binary binary = scripted(dir, 1000, "http://127.0.0.1:9");
        String before = System.getProperty("larder.binary");
        System.setProperty("larder.binary", binary.path());
        try {
            for (int call = 1; call <= 2; call++) {
                LarderException e = assertThrows(LarderException.class, SharedServer::client);
                assertTrue(e.getMessage().endsWith("scripted larder: failure " + 3 * call), e.getMessage());
                assertEquals(3 * call, runs(binary).size(), "each call runs `larder up` anew");
            }
        } finally {
            if (before == null) System.clearProperty("larder.binary");
            else System.setProperty("larder.binary", before);
        }
    }

    @Test
    void onPathFindsAnExecutable() throws Exception {
        Path sh = SharedServer.onPath("sh");
        assertNotNull(sh);
        assertTrue(Files.isExecutable(sh));
        assertEquals(null, SharedServer.onPath("larder-no-such-program"));
    }

    @Test
    void surefireForksAreToldByTheirBooter() {
        assertTrue(SharedServer.isSurefireFork("/p/target/surefire/surefirebooter1524803240087733256.jar /p/target/surefire 2026-11-24T02-44-36_304-jvmRun1 surefire1tmp surefire_0tmp", null, null));
        assertTrue(SharedServer.isSurefireFork("org.apache.maven.surefire.booter.ForkedBooter /p/target/surefire x y z", null, null));
        assertTrue(SharedServer.isSurefireFork("", "/p/target/test-classes:/p/target/classes", null));
        assertTrue(SharedServer.isSurefireFork("", null, "/p/target/surefire/surefirebooter1.jar"));
        assertFalse(SharedServer.isSurefireFork("worker.org.gradle.process.internal.worker.GradleWorkerMain 'Gradle Test Executor 1'", null, null));
        assertFalse(SharedServer.isSurefireFork("org.junit.platform.console.ConsoleLauncher --select-class x", null, null));
        assertFalse(SharedServer.isSurefireFork("/usr/share/java/junit-platform-console-standalone.jar --scan-class-path", null, null));
        assertFalse(SharedServer.isSurefireFork("com.intellij.rt.junit.JUnitStarter -ideVersion5 x", null, null));
    }

    @Test
    void mavensJvmIsToldByItsLauncherAndMavenDaemonsAreNot() {
        assertTrue(SharedServer.isMaven("-classpath /usr/share/maven/boot/plexus-classworlds-2.x.jar -Dclassworlds.conf=/usr/share/maven/bin/m2.conf "
                + "-Dmaven.home=/usr/share/maven -Dlibrary.jansi.path=/usr/share/maven/lib/jansi-native "
                + "-Dmaven.multiModuleProjectDirectory=/p org.codehaus.plexus.classworlds.launcher.Launcher test"));
        assertTrue(SharedServer.isMaven("-Dmaven.home=/opt/maven -cp x org.apache.maven.cling.MavenCling test"));
        assertFalse(SharedServer.isMaven("-Dmvnd.home=/opt/mvnd -Dmaven.home=/opt/mvnd/mvn -cp /opt/mvnd/mvn/boot/plexus-classworlds.jar "
                + "org.mvndaemon.mvnd.common.MavenDaemon"));
        assertFalse(SharedServer.isMaven("-Xmx512m -cp gradle-launcher.jar org.gradle.launcher.daemon.bootstrap.GradleDaemon 8.5"));
        assertFalse(SharedServer.isMaven("-jar /usr/share/java/junit-platform-console-standalone.jar"));
    }

    @Test
    void thisJvmIsServedAndMavensWhenItIsAFork() {
        List<Long> pids = SharedServer.servedPids();
        assertEquals(SELF, pids.get(0));
        if (System.getProperty("surefire.test.class.path") == null) {
            assertEquals(List.of(SELF), pids, "not a Surefire fork (test.sh)");
        } else {
            // Under `mvn test`: Maven's JVM, above the /bin/sh that Surefire starts a fork with.
            assertEquals(2, pids.size(), "a Surefire fork serves Maven's JVM too: " + pids);
            Optional<ProcessHandle> maven = ProcessHandle.of(pids.get(1));
            assertTrue(maven.isPresent());
            String args = String.join(" ", maven.get().info().arguments().orElse(new String[0]));
            assertTrue(args.contains("classworlds"), args);
        }
    }

    @Test
    void theIndexOfAPackedServer() {
        ShippedServer.Index index = ShippedServer.Index.parse("# comment\nversion 1.2.3\nfile 0755 10 abc larder\nfile 0644 3 def lib/libz.so.1\n");
        assertEquals("1.2.3", index.version());
        assertEquals(List.of(new ShippedServer.Entry("0755", 10, "abc", "larder"), new ShippedServer.Entry("0644", 3, "def", "lib/libz.so.1")),
                index.files());
        assertThrows(IllegalArgumentException.class, () -> ShippedServer.Index.parse("version 1\nfile 0644 1 a ../larder\nfile 0755 1 a larder\n"));
        assertThrows(IllegalArgumentException.class, () -> ShippedServer.Index.parse("version 1\nfile 0644 1 a lib/x\n"));
        assertEquals("linux-x86_64".equals(ShippedServer.platform()) || "linux-aarch64".equals(ShippedServer.platform()),
                System.getProperty("os.name").equals("Linux"));
    }
}
