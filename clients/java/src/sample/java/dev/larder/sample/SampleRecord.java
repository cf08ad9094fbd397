package dev.larder.sample;

import dev.larder.Store;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** What a sample test saw, for the outer test: its store's id and label (as the server has it). */
public final class SampleRecord {
    private SampleRecord() {}

    /** Writes {@code $LARDER_SAMPLE_IDS/<name>.id} and {@code <name>.label} (UTF-8) when that variable is set. */
    public static void record(String name, Store store) throws IOException {
        String dir = System.getenv("LARDER_SAMPLE_IDS");
        if (dir == null) return;
        Files.writeString(Path.of(dir, name + ".label"), String.valueOf(store.info().label()), StandardCharsets.UTF_8);
        Files.writeString(Path.of(dir, name + ".id"), store.id());
    }
}
