package dev.larder;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Stands in for Maven's JVM in SelfStartTest (it is started with {@code -Dmaven.home=…}, as Maven's
 * launcher is): runs the fork command of its arguments twice, one after the other and 1.5 s apart
 * (longer than a server's second of grace), each through {@code /bin/sh -c} as Surefire starts its forks.
 */
public final class FakeMaven {
    private FakeMaven() {}

    public static void main(String[] args) throws Exception {
        for (int fork = 0; fork < 2; fork++) {
            if (fork > 0) Thread.sleep(1500);
            List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", "\"$@\"; exit $?", "sh"));
            cmd.addAll(Arrays.asList(args));
            new ProcessBuilder(cmd).inheritIO().start().waitFor();
        }
    }
}
