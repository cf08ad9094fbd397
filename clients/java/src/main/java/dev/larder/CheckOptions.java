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
    private Expectations expect;
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
     * The expectations, as a {@code .expect.json} says them: the version, counts, SQL true after migrating
     * and before (on the upload as it arrived), data dropped, moved or deleted on purpose. Null sends none.
     */
    public CheckOptions expect(Expectations expect) {
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
        body.put("against", json(against));
        if (snapshot != null) body.put("snapshot", snapshot);
        if (expect != null) body.put("expect", expect.toJson());
        if (skipDataCheck) body.put("data", false);
        return body;
    }

    /** The {@code against} object of each kind of reference. */
    static Map<String, Object> json(Reference against) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (against instanceof Reference.Build b) {
            m.put("build", b.key());
        } else if (against instanceof Reference.Template t) {
            m.put("template", t.name());
            if (t.version() != null) m.put("version", t.version());
        } else if (against instanceof Reference.LiveStore l) {
            m.put("store", l.id());
        }
        return m;
    }
}
