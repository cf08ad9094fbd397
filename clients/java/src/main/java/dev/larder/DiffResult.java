// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The answer of {@link Store#diff}: what changed in a store since it was created.
 *
 * <p>{@link #base()} says in words what the store was made from ({@code "template gallery at version 6
 * with fixtures artists"}); {@link #tables()} holds the tables with changed rows only; {@link #schema()}
 * the tables, columns, indexes, foreign keys, views and triggers added, removed and changed. Values are
 * as {@link Json#parse} reads them ({@code Long}, {@code Double}, {@code String}, {@code null}); a blob is
 * a map {@code {"base64": "..."}}, as in a {@link QueryResult}.
 */
public record DiffResult(String base, Schema schema, Map<String, TableDiff> tables) {
    public DiffResult {
        tables = Collections.unmodifiableMap(new LinkedHashMap<>(tables));
    }

    /** The schema objects added, removed and changed. */
    public record Schema(List<SchemaChange> added, List<SchemaChange> removed, List<SchemaChange> changed) {
        public Schema {
            added = List.copyOf(added);
            removed = List.copyOf(removed);
            changed = List.copyOf(changed);
        }

        /** True when nothing was added, removed or changed. */
        public boolean isEmpty() {
            return added.isEmpty() && removed.isEmpty() && changed.isEmpty();
        }
    }

    /**
     * One schema object: {@code type} is {@code table}, {@code column}, {@code index},
     * {@code foreign_keys}, {@code view} or {@code trigger}; {@code table} the table of a column or an
     * index (else null); {@code before} and {@code after} its description before and after (JSON
     * {@code old} and {@code new}; null when it was added or removed).
     */
    public record SchemaChange(String type, String name, String table, Object before, Object after) {}

    /**
     * What changed in one table. The counts are always whole; {@code rows} lists at most the
     * {@code limit} asked for, and {@code truncated} says that it lists fewer than changed.
     */
    public record TableDiff(long inserted, long updated, long deleted, boolean truncated, List<Row> rows) {
        public TableDiff {
            rows = List.copyOf(rows);
        }
    }

    /**
     * One changed row: {@code op} is {@code insert}, {@code update} or {@code delete}; {@code key} its
     * key (declared primary key, else rowid); {@code before} and {@code after} the row (JSON {@code old}
     * and {@code new}): {@code before} is null for an insert, {@code after} for a delete.
     */
    public record Row(String op, Map<String, Object> key, Map<String, Object> before, Map<String, Object> after) {
        public Row {
            key = copy(key);
            before = copy(before);
            after = copy(after);
        }
    }

    /** Reads the JSON answer of {@code GET /stores/{id}/diff}. */
    static DiffResult from(Map<String, Object> json) {
        Map<String, Object> schema = json.get("schema") == null ? Map.of() : Json.asObject(json.get("schema"), "diff schema");
        Map<String, TableDiff> tables = new LinkedHashMap<>();
        if (json.get("tables") != null) {
            for (Map.Entry<String, Object> e : Json.asObject(json.get("tables"), "diff tables").entrySet()) {
                Map<String, Object> t = Json.asObject(e.getValue(), "diff of " + e.getKey());
                List<Row> rows = new ArrayList<>();
                for (Object r : Json.asList(t.get("rows"), "diff rows")) {
                    Map<String, Object> row = Json.asObject(r, "diff row");
                    rows.add(new Row(Json.text(row.get("op")), objectOrNull(row.get("key")),
                            objectOrNull(row.get("old")), objectOrNull(row.get("new"))));
                }
                tables.put(e.getKey(), new TableDiff(Json.number(t.get("inserted")), Json.number(t.get("updated")),
                        Json.number(t.get("deleted")), Boolean.TRUE.equals(t.get("truncated")), rows));
            }
        }
        return new DiffResult(Json.text(json.get("base")),
                new Schema(changes(schema.get("added")), changes(schema.get("removed")), changes(schema.get("changed"))),
                tables);
    }

    private static List<SchemaChange> changes(Object list) {
        List<SchemaChange> out = new ArrayList<>();
        for (Object o : Json.asList(list, "schema changes")) {
            Map<String, Object> c = Json.asObject(o, "schema change");
            out.add(new SchemaChange(Json.text(c.get("type")), Json.text(c.get("name")), Json.text(c.get("table")),
                    c.get("old"), c.get("new")));
        }
        return out;
    }

    private static Map<String, Object> objectOrNull(Object v) {
        return v == null ? null : Json.asObject(v, "diff row values");
    }

    private static Map<String, Object> copy(Map<String, Object> m) {
        return m == null ? null : Collections.unmodifiableMap(new LinkedHashMap<>(m));
    }
}
