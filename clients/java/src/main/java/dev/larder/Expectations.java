// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What a migrated snapshot must show besides the server's own rules, in the shape of a
 * {@code NAME.expect.json} ({@link CheckOptions#expect}, {@link SnapshotCheck#expect}). Fluent; each call
 * adds to what is set, and only what is set is sent.
 *
 * <pre>{@code
 * Expectations.create()
 *         .before("SELECT count(*) = 3 FROM notes")        // on the upload as it arrived
 *         .count("notes", 3)
 *         .asserts("SELECT count(*) = 0 FROM notes WHERE pinned")
 *         .drops("notes.legacy_code")
 * Expectations.parse(Files.readString(Path.of("v1.expect.json")))
 * }</pre>
 */
public final class Expectations {
    // The .expect.json object as it will be sent: a parsed file keeps keys this class has no method for.
    private final Map<String, Object> json;

    private Expectations(Map<String, Object> json) {
        this.json = json;
    }

    /** Nothing expected yet. */
    public static Expectations create() {
        return new Expectations(new LinkedHashMap<>());
    }

    /**
     * The text of a {@code .expect.json}, as it is: the server judges its keys and values (an unknown key
     * is its 400).
     *
     * @throws IllegalArgumentException when {@code text} is not a JSON object
     */
    public static Expectations parse(String text) {
        if (!(Json.parse(text) instanceof Map<?, ?> object)) {
            throw new IllegalArgumentException("an .expect.json must be a JSON object");
        }
        Map<String, Object> json = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : object.entrySet()) json.put(String.valueOf(e.getKey()), e.getValue());
        return new Expectations(json);
    }

    /** {@code version}: the version the store's bookkeeping names after migrating. */
    public Expectations version(String version) {
        json.put("version", Objects.requireNonNull(version, "version"));
        return this;
    }

    /** {@code counts}: {@code table} holds exactly {@code rows} rows after migrating. */
    public Expectations count(String table, long rows) {
        object("counts").put(Objects.requireNonNull(table, "table"), rows);
        return this;
    }

    /** {@code min_counts}: {@code table} holds at least {@code rows} rows after migrating. */
    public Expectations minCount(String table, long rows) {
        object("min_counts").put(Objects.requireNonNull(table, "table"), rows);
        return this;
    }

    /** {@code assert}: SQL that must answer true after migrating (one read-only statement each). */
    public Expectations asserts(String... sql) {
        list("assert").addAll(Arrays.asList(sql));
        return this;
    }

    /** {@code before}: SQL that must answer true on the upload as it arrived, before the migrator ran. */
    public Expectations before(String... sql) {
        list("before").addAll(Arrays.asList(sql));
        return this;
    }

    /** {@code drops}: tables ({@code "old_table"}) and columns ({@code "artists.legacy_code"}) dropped with their data on purpose. */
    public Expectations drops(String... tablesOrColumns) {
        list("drops").addAll(Arrays.asList(tablesOrColumns));
        return this;
    }

    /** {@code moves}: the values of column {@code from} moved to column {@code to} ({@code "table.column"} each); checked. */
    public Expectations move(String from, String to) {
        object("moves").put(Objects.requireNonNull(from, "from"), Objects.requireNonNull(to, "to"));
        return this;
    }

    /** {@code deletes}: every row of {@code table} may be deleted ({@code "*"}). */
    public Expectations deletesAll(String table) {
        object("deletes").put(Objects.requireNonNull(table, "table"), "*");
        return this;
    }

    /** {@code deletes}: up to {@code rows} rows of {@code table} may be deleted. */
    public Expectations deletes(String table, long rows) {
        object("deletes").put(Objects.requireNonNull(table, "table"), rows);
        return this;
    }

    Map<String, Object> toJson() {
        return json;
    }

    /** A member that is a JSON object, made (or copied from a parsed file's) so that it can take more. */
    private Map<String, Object> object(String key) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (json.get(key) instanceof Map<?, ?> old) old.forEach((k, v) -> m.put(String.valueOf(k), v));
        json.put(key, m);
        return m;
    }

    /** A member that is a JSON array, as {@link #object}. */
    private List<Object> list(String key) {
        List<Object> l = new ArrayList<>();
        if (json.get(key) instanceof List<?> old) l.addAll(old);
        json.put(key, l);
        return l;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Expectations e && e.json.equals(json);
    }

    @Override
    public int hashCode() {
        return json.hashCode();
    }

    /** The {@code .expect.json} text that is sent. */
    @Override
    public String toString() {
        return Json.write(json);
    }
}
