// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.time.Instant;
import java.util.Map;

/**
 * The answer of {@link Larder#health()}: {@code status} ({@code "ok"}), the server's {@code version},
 * the SQLite it runs, how many {@code stores} it holds and {@code templates} it serves (0: it makes stores
 * of uploads and builds only), and when it started.
 */
public record Health(String status, String version, String sqliteVersion, long stores, long templates,
                     Instant startedAt) {
    /** True when the server says it is {@code "ok"}. */
    public boolean isOk() {
        return "ok".equals(status);
    }

    /** Reads the API's health object. */
    static Health from(Map<String, Object> json) {
        return new Health(Json.text(json.get("status")), Json.text(json.get("version")),
                Json.text(json.get("sqlite_version")), Json.number(json.get("stores")), Json.number(json.get("templates")),
                Json.instant(json.get("started_at"), "started_at"));
    }
}
