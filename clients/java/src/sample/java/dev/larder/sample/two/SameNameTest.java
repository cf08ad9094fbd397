package dev.larder.sample.two;

import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.sample.SampleRecord;
import java.io.IOException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** dev.larder.sample.one.SameNameTest's twin: the same simple name, the same method, another package. */
@ExtendWith(LarderExtension.class)
class SameNameTest {
    @Test
    void sameName(Store store) throws IOException {
        SampleRecord.record("two.sameName", store);
    }
}
