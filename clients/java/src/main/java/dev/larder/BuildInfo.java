// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.nio.file.Path;
import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An app-built template ({@code GET /builds/{key}}), made with {@link Larder#build(String, BuildStep)}.
 *
 * <p>{@link #state()} is {@code "building"} or {@code "ready"}. {@link #path()} is the file being built
 * (only in the answer to the caller who builds it, else null). {@link #version()} (the migration version
 * the server found in it, or null), {@link #counts()} (rows per user table) and {@link #sizeBytes()} are
 * known once it is ready (before: null, empty and null). The times are null when they do not apply:
 * {@code expiresAt} is when an unfinished build's lease runs out.
 */
public record BuildInfo(String key, String state, String label, Path path, String version,
                        Map<String, Long> counts, Long sizeBytes,
                        Instant startedAt, Instant finishedAt, Instant expiresAt) {
    public BuildInfo {
        counts = counts == null ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(counts));
    }

    /** True once the build is finished: stores can be made of it ({@code StoreOptions.create().build(key)}). */
    public boolean isReady() {
        return "ready".equals(state);
    }

    /** True while someone builds it. */
    public boolean isBuilding() {
        return "building".equals(state);
    }

    /** Reads the API's build object. */
    static BuildInfo from(Map<String, Object> json) {
        if (!(json.get("key") instanceof String key) || !(json.get("state") instanceof String state)) {
            throw new LarderException(0, "bad_response", "a build answer without key or state: " + Json.write(json), Map.of());
        }
        String path = Json.text(json.get("path"));
        Object size = json.get("size_bytes");
        return new BuildInfo(key, state, Json.text(json.get("label")), path == null ? null : Path.of(path),
                Json.text(json.get("version")), Json.asCounts(json.get("counts")),
                size instanceof Number n ? n.longValue() : null,
                Json.instant(json.get("started_at"), "started_at"), Json.instant(json.get("finished_at"), "finished_at"),
                Json.instant(json.get("expires_at"), "expires_at"));
    }
}
