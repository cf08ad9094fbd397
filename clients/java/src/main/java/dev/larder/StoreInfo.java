// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A store as the server describes it ({@code POST /stores}, {@code GET /stores/{id}}, {@code PATCH},
 * {@code reset}): {@link Store#created()}, {@link Store#info()}, {@link Store#keep()}, {@link Store#reset()}.
 *
 * <p>{@code template}, {@code version}, {@code snapshot}, {@code build} (the app-built template it copies)
 * and {@code label} are null when they do not apply; {@code fixtures} are the data fixtures it was made
 * with; {@code counts} the rows per user table; {@code expiresAt} is null for a store kept forever;
 * {@code links} the absolute URLs of its endpoints by name ({@code self}, {@code artifact}, {@code query}
 * ...). {@code raw} is the whole answer, for fields this record does not name.
 */
public record StoreInfo(String id, Path path, String template, String version, String snapshot,
                        List<String> fixtures, String build, String label, Map<String, Long> counts,
                        Instant createdAt, Instant expiresAt, boolean keep, long sizeBytes,
                        Map<String, String> links, Map<String, Object> raw) {
    public StoreInfo {
        fixtures = Collections.unmodifiableList(new ArrayList<>(fixtures));
        counts = Collections.unmodifiableMap(new LinkedHashMap<>(counts));
        links = Collections.unmodifiableMap(new LinkedHashMap<>(links));
        raw = Collections.unmodifiableMap(new LinkedHashMap<>(raw));
    }

    /** This answer with {@code label} for its label (in {@link #raw} too). */
    StoreInfo withLabel(String label) {
        Map<String, Object> json = new LinkedHashMap<>(raw);
        json.put("label", label);
        return new StoreInfo(id, path, template, version, snapshot, fixtures, build, label, counts, createdAt, expiresAt,
                keep, sizeBytes, links, json);
    }

    /** Reads the API's store object; one without an id or a path is not a store. */
    static StoreInfo from(Map<String, Object> json) {
        if (!(json.get("id") instanceof String id) || !(json.get("path") instanceof String path)) {
            throw new LarderException(0, "bad_response", "a store answer without id or path: " + Json.write(json), Map.of());
        }
        Map<String, String> links = new LinkedHashMap<>();
        if (json.get("links") != null) {
            for (Map.Entry<String, Object> e : Json.asObject(json.get("links"), "links").entrySet()) {
                links.put(e.getKey(), Json.text(e.getValue()));
            }
        }
        return new StoreInfo(id, Path.of(path), Json.text(json.get("template")), Json.text(json.get("version")),
                Json.text(json.get("snapshot")), Json.texts(json.get("fixtures"), "fixtures"),
                Json.text(json.get("build")), Json.text(json.get("label")), Json.asCounts(json.get("counts")),
                Json.instant(json.get("created_at"), "created_at"), Json.instant(json.get("expires_at"), "expires_at"),
                Boolean.TRUE.equals(json.get("keep")), Json.number(json.get("size_bytes")), links, json);
    }
}
