// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The optional parts of {@link Larder#check(String, Reference, CheckOptions)}: the snapshot's name, the
 * expectations, and whether the data-kept rule applies. Fluent; only what is set is sent.
 */
public final class CheckOptions {
    private String snapshot;
    private Map<String, Object> expect;
    private boolean skipDataCheck;

    private CheckOptions() {}

    /** Nothing set: the reference alone. */
    public static CheckOptions create() {
        return new CheckOptions();
    }

    /** The snapshot's name, as the result (and its JUnit test case) names it, e.g. {@code "v1.sqlite"}. */
    public CheckOptions snapshot(String snapshot) {
        this.snapshot = snapshot;
        return this;
    }

    /**
     * The expectations, in the {@code .expect.json} shape: {@code version}, {@code counts},
     * {@code min_counts}, {@code assert} (SQL true after migrating), {@code before} (SQL true on the
     * upload as it arrived), {@code drops}, {@code moves}, {@code deletes}. Null sends none.
     */
    public CheckOptions expect(Map<String, Object> expect) {
        this.expect = expect;
        return this;
    }

    /** Sends {@code "data": false}: the rule that every column that held data still holds it is not checked. */
    public CheckOptions skipDataCheck() {
        this.skipDataCheck = true;
        return this;
    }

    Map<String, Object> toJson(Reference against) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("against", against.toJson());
        if (snapshot != null) body.put("snapshot", snapshot);
        if (expect != null) body.put("expect", expect);
        if (skipDataCheck) body.put("data", false);
        return body;
    }
}
