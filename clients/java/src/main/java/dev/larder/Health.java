// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.time.Instant;
import java.util.Map;

/**
 * The answer of {@link Larder#health()}: {@code status} ({@code "ok"}), the server's {@code version},
 * the SQLite it runs, how many {@code stores} it holds and {@code templates} it serves (0: it makes stores
 * of uploads and builds only), when it started, its root's storage, and the buckets it shares templates and
 * artifacts through.
 */
public record Health(String status, String version, String sqliteVersion, long stores, long templates,
                     Instant startedAt, Storage storage, Cache cache) {
    /**
     * The root's file system (null when the server cannot tell) and whether a copy there shares its blocks
     * (XFS with reflinks, btrfs): any size in well under a millisecond, taking no room until written.
     */
    public record Storage(String fileSystem, boolean sharesBlocks) {
    }

    /**
     * The fleet's bucket ({@code --cache-url}, null when none), whether this server only reads it, and
     * where kept stores' artifacts go ({@code --artifacts-url}, null when none); never credentials.
     */
    public record Cache(String url, boolean readOnly, String artifactsUrl) {
    }

    /** True when the server says it is {@code "ok"}. */
    public boolean isOk() {
        return "ok".equals(status);
    }

    /** Reads the API's health object. */
    static Health from(Map<String, Object> json) {
        // (A server before the fleet cache says nothing of it.)
        Map<String, Object> cache = json.get("cache") == null ? Map.of() : Json.asObject(json.get("cache"), "cache");
        // (Nor one before issue 48 of its storage.)
        Map<String, Object> storage = json.get("storage") == null ? Map.of() : Json.asObject(json.get("storage"), "storage");
        return new Health(Json.text(json.get("status")), Json.text(json.get("version")),
                Json.text(json.get("sqlite_version")), Json.number(json.get("stores")), Json.number(json.get("templates")),
                Json.instant(json.get("started_at"), "started_at"),
                new Storage(Json.text(storage.get("file_system")), Boolean.TRUE.equals(storage.get("shares_blocks"))),
                new Cache(Json.text(cache.get("url")), Boolean.TRUE.equals(cache.get("read_only")), Json.text(cache.get("artifacts_url"))));
    }
}
