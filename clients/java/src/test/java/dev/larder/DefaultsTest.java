package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.larder.junit.LarderExtension;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** The client's defaults are the ones every client shares: clients/defaults.json. */
class DefaultsTest {
    /** clients/defaults.json: from {@code -Dlarder.test.defaults} (test.sh sets it), else beside the project. */
    static Path table() {
        String given = System.getProperty("larder.test.defaults");
        return given != null ? Path.of(given) : Path.of("..", "defaults.json");
    }

    @Test
    void theConstantsAreTheSharedDefaults() throws Exception {
        Map<String, Object> constants = new TreeMap<>();
        constants.put("default_url", Larder.DEFAULT_URL);
        constants.put("request_timeout_ms", ms(Larder.DEFAULT_REQUEST_TIMEOUT));
        constants.put("wait_timeout_ms", StoreOptions.DEFAULT_BUILD_WAIT_MS);
        constants.put("build_timeout_ms", ms(Larder.DEFAULT_BUILD_TIMEOUT));
        constants.put("build_poll_ms", Larder.BUILD_POLL_MS);
        constants.put("download_timeout_ms", ms(Larder.DEFAULT_DOWNLOAD_TIMEOUT));
        constants.put("finish_attempts", (long) Larder.FINISH_ATTEMPTS);
        constants.put("retry_after_default_ms", ms(Larder.RETRY_AFTER_DEFAULT));
        constants.put("retry_after_max_ms", ms(Larder.RETRY_AFTER_MAX));
        constants.put("artifacts_dir", LarderExtension.DEFAULT_ARTIFACTS_DIR);
        constants.put("artifact_name_max_chars", (long) LarderExtension.ARTIFACT_NAME_MAX);
        constants.put("run_variables", SharedServer.RUN_VARIABLES);
        constants.put("label_max_bytes", (long) SharedServer.LABEL_MAX_BYTES);

        Map<String, Object> table = new TreeMap<>();
        Map<String, Object> entries = Json.asObject(Json.parse(Files.readString(table())), "defaults");
        for (Map.Entry<String, Object> e : entries.entrySet()) {
            if (!e.getKey().startsWith("_")) table.put(e.getKey(), Json.asObject(e.getValue(), e.getKey()).get("value"));
        }
        assertEquals(new TreeSet<>(table.keySet()), new TreeSet<>(constants.keySet()),
                "an entry of clients/defaults.json has no constant here, or one too many");
        for (Map.Entry<String, Object> e : table.entrySet()) {
            assertEquals(e.getValue(), constants.get(e.getKey()), e.getKey() + ": the client's constant differs from clients/defaults.json");
        }
    }

    private static Object ms(Duration d) {
        return d.toMillis();
    }
}
