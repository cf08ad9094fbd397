// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * The answer of {@link Store#migrate(String)}: the version the store was at ({@code from}), the one it is
 * at now ({@code to}; either null for a store without migrations), and the migrations run, in order.
 */
public record MigrateResult(String from, String to, List<Applied> applied) {
    public MigrateResult {
        applied = Collections.unmodifiableList(new ArrayList<>(applied));
    }

    /**
     * One migration run: its version and name, how long it took in milliseconds, and its
     * {@code direction}: {@code up}, {@code down} or {@code repeatable}.
     */
    public record Applied(String version, String name, double ms, String direction) {}

    /** Reads the API's answer of {@code POST /stores/{id}/migrate}. */
    static MigrateResult from(Map<String, Object> json) {
        List<Applied> applied = new ArrayList<>();
        for (Object o : Json.asList(json.get("applied"), "applied")) {
            Map<String, Object> m = Json.asObject(o, "applied migration");
            applied.add(new Applied(Json.text(m.get("version")), Json.text(m.get("name")),
                    m.get("ms") instanceof Number n ? n.doubleValue() : 0, Json.text(m.get("direction"))));
        }
        return new MigrateResult(Json.text(json.get("from")), Json.text(json.get("to")), applied);
    }
}
