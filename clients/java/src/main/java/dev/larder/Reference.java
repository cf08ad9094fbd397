// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What a store the application's own migrator migrated must match ({@code "against"} of
 * {@code POST /stores/{id}/check}): a ready app-built template, a template at a version, or a live
 * store.
 *
 * <pre>{@code
 * Reference.build(key)                 // a build the same migrator made (see Larder#build)
 * Reference.template("gallery", "5")   // a fresh build of a fixtures template; template(name) for latest
 * Reference.store(other)               // another store, as it is now
 * }</pre>
 */
public final class Reference {
    private final Map<String, Object> json;

    private Reference(Map<String, Object> json) {
        this.json = json;
    }

    /** A ready app-built template ({@link Larder#build(String, BuildStep)}). */
    public static Reference build(String key) {
        return new Reference(Map.of("build", Objects.requireNonNull(key, "key")));
    }

    /** A fresh build of {@code template} at its latest version. */
    public static Reference template(String template) {
        return new Reference(Map.of("template", Objects.requireNonNull(template, "template")));
    }

    /** A fresh build of {@code template} at {@code version} ({@code "latest"} or one of its versions). */
    public static Reference template(String template, String version) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("template", Objects.requireNonNull(template, "template"));
        m.put("version", Objects.requireNonNull(version, "version"));
        return new Reference(m);
    }

    /** A live store, as it is now. */
    public static Reference store(String id) {
        return new Reference(Map.of("store", Objects.requireNonNull(id, "id")));
    }

    /** A live store, as it is now. */
    public static Reference store(Store store) {
        return store(store.id());
    }

    Map<String, Object> toJson() {
        return json;
    }

    @Override
    public String toString() {
        return "Reference" + json;
    }
}
