package bench;

import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** bench/frameworks, larder: the extension's store, a row written to its path. */
@ExtendWith(LarderExtension.class)
class LarderTest {
    // BENCH-REPEAT-BEGIN
    @Test
    void tNNNN(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store) throws Exception {
        BenchWrite.write(store.path());
    }
    // BENCH-REPEAT-END
}
