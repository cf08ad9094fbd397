// SPDX-License-Identifier: Apache-2.0
package dev.larder;

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
public sealed interface Reference permits Reference.Build, Reference.Template, Reference.LiveStore {
    /** A ready app-built template ({@link Larder#build(String, BuildStep)}), by its key. */
    record Build(String key) implements Reference {
        public Build {
            Objects.requireNonNull(key, "key");
        }
    }

    /** A fresh build of a template at {@code version}; a null version is the template's latest (none is sent). */
    record Template(String name, String version) implements Reference {
        public Template {
            Objects.requireNonNull(name, "template");
        }
    }

    /** A live store, by its id, as it is at the time of the check. */
    record LiveStore(String id) implements Reference {
        public LiveStore {
            Objects.requireNonNull(id, "id");
        }
    }

    /** A ready app-built template ({@link Larder#build(String, BuildStep)}). */
    static Reference build(String key) {
        return new Build(key);
    }

    /** A fresh build of {@code template} at its latest version. */
    static Reference template(String template) {
        return new Template(template, null);
    }

    /** A fresh build of {@code template} at {@code version} ({@code "latest"} or one of its versions). */
    static Reference template(String template, String version) {
        return new Template(template, Objects.requireNonNull(version, "version"));
    }

    /** A live store, as it is now. */
    static Reference store(String id) {
        return new LiveStore(id);
    }

    /** A live store, as it is now. */
    static Reference store(Store store) {
        return new LiveStore(store.id());
    }
}
