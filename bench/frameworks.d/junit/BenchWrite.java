package bench;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;

/**
 * The test's work in bench/frameworks' JUnit suites: one row inserted and committed (autocommit) into
 * the SQLite file at {@code path} with the SQLite JDBC driver (Debian's xerial sqlite-jdbc), or with the
 * sqlite3 command-line tool when LARDER_BENCH_WRITER=cli.
 */
final class BenchWrite {
    static final String ROW = "INSERT INTO albums (title) VALUES ('Summer')";
    static final Path TEMPLATE = Path.of(System.getenv().getOrDefault("LARDER_BENCH_TEMPLATE", "-"));
    private static final boolean CLI = "cli".equals(System.getenv("LARDER_BENCH_WRITER"));

    private BenchWrite() {}

    static void write(Path path) throws Exception {
        if (CLI) {
            Process p = new ProcessBuilder("sqlite3", path.toString(), ROW).inheritIO().start();
            if (p.waitFor() != 0) {
                throw new IllegalStateException("sqlite3 exited " + p.exitValue());
            }
            return;
        }
        try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + path);
                Statement statement = db.createStatement()) {
            statement.executeUpdate(ROW);
        }
    }
}
