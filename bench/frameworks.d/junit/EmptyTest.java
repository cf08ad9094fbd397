package bench;

import org.junit.jupiter.api.Test;

/** bench/frameworks, empty: the framework's own cost per test. */
class EmptyTest {
    // BENCH-REPEAT-BEGIN
    @Test
    void tNNNN() {}
    // BENCH-REPEAT-END
}
