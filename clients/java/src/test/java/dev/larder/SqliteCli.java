package dev.larder;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The {@code sqlite3} command-line tool, a real SQLite writer outside this JVM (as an app on a device or in
 * a container would be): the remote-mode tests write to a store's local copy with it.
 */
final class SqliteCli {
    private SqliteCli() {}

    /** {@code sqlite3 -batch DB ARG...} (SQL or dot-commands, in order): its output, stripped; throws unless it exits 0. */
    static String run(Path db, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("sqlite3", "-batch", db.toString()));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("sqlite3 " + String.join(" ", args) + " did not finish");
        }
        if (p.exitValue() != 0) throw new AssertionError("sqlite3 " + db + " " + String.join(" ", args) + " exited " + p.exitValue() + ": " + out);
        return out;
    }

    /** The one value a query answers, as sqlite3 prints it. */
    static long count(Path db, String sql) throws Exception {
        return Long.parseLong(run(db, sql));
    }
}
