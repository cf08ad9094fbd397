package bench;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** bench/frameworks, naive: the template file copied into the test's @TempDir, a row written to the copy. */
class NaiveTest {
    // BENCH-REPEAT-BEGIN
    @Test
    void tNNNN(@TempDir Path dir) throws Exception {
        Path path = dir.resolve("store.sqlite");
        Files.copy(BenchWrite.TEMPLATE, path);
        BenchWrite.write(path);
    }
    // BENCH-REPEAT-END
}
