// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The server's judgement of one store ({@code POST /stores/{id}/check}): {@code kind} {@code "app"} for
 * a store the application's own migrator migrated ({@code template} is then null), the snapshot's name,
 * the versions its bookkeeping named before and after, whether it passed, how long the check took, one
 * message per failure, notes, and the whole answer ({@code raw}). {@code storeId} and {@code kept} are
 * {@link Larder#checkSnapshot}'s: the store it uploaded, and whether it was kept (the check failed) rather
 * than deleted; null and false from {@link Larder#check}.
 */
public record CheckResult(String template, String kind, String snapshot, String fromVersion, String toVersion,
                          boolean passed, double ms, List<String> failures, List<String> notes,
                          String storeId, boolean kept, Map<String, Object> raw) {
    public CheckResult {
        failures = Collections.unmodifiableList(new ArrayList<>(failures));
        notes = Collections.unmodifiableList(new ArrayList<>(notes));
        raw = Collections.unmodifiableMap(new LinkedHashMap<>(raw));
    }

    /** Reads the API's result object. */
    static CheckResult from(Map<String, Object> json) {
        if (!(json.get("passed") instanceof Boolean passed)) {
            throw new LarderException(0, "bad_response", "a check result without passed: " + Json.write(json), Map.of());
        }
        Object ms = json.get("ms");
        return new CheckResult(Json.text(json.get("template")), Json.text(json.get("kind")), Json.text(json.get("snapshot")),
                Json.text(json.get("from_version")), Json.text(json.get("to_version")), passed,
                ms instanceof Number n ? n.doubleValue() : 0, Json.texts(json.get("failures"), "failures"),
                Json.texts(json.get("notes"), "notes"), null, false, json);
    }

    /** This result with the store {@link Larder#checkSnapshot} uploaded, kept or not. */
    CheckResult withStore(String id, boolean kept) {
        return new CheckResult(template, kind, snapshot, fromVersion, toVersion, passed, ms, failures, notes, id, kept, raw);
    }

    /**
     * The result as a test failure tells it: the snapshot and its versions, whether it passed, the store
     * kept, then every failure on a line of its own.
     */
    public String report() {
        String head = (snapshot == null ? "store" : snapshot) + " (" + (fromVersion == null ? "?" : fromVersion)
                + " → " + (toVersion == null ? "?" : toVersion) + ")";
        if (passed) return head + " passed the migration check";
        StringBuilder b = new StringBuilder(head).append(" failed the migration check");
        if (storeId != null) b.append("; store ").append(storeId).append(kept ? " is kept" : " is deleted");
        b.append(':');
        for (String f : failures.isEmpty() ? List.of("(the check failed without saying why)") : failures) {
            b.append("\n    ").append(f);
        }
        return b.toString();
    }
}
