// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The answer of {@link Store#query}: column names, rows (values as {@link Json#parse} reads them:
 * {@code Long}, {@code Double}, {@code String}, {@code null}; a blob is a map {@code {"base64": "..."}}),
 * the number of rows changed, and whether the server left rows out ({@code truncated}: the answer
 * reached its row or size limit).
 */
public record QueryResult(List<String> columns, List<List<Object>> rows, long changes, boolean truncated) {
    public QueryResult {
        columns = Collections.unmodifiableList(new ArrayList<>(columns));
        List<List<Object>> copy = new ArrayList<>(rows.size());
        for (List<Object> row : rows) copy.add(Collections.unmodifiableList(new ArrayList<>(row)));
        rows = Collections.unmodifiableList(copy);
    }

    /** The first column of the first row, or {@code null} when there is no row (handy for {@code SELECT count(*)}). */
    public Object scalar() {
        return rows.isEmpty() || rows.get(0).isEmpty() ? null : rows.get(0).get(0);
    }

    /** The rows as maps from column name to value, in column order. */
    public List<Map<String, Object>> maps() {
        List<Map<String, Object>> out = new ArrayList<>(rows.size());
        for (List<Object> row : rows) {
            Map<String, Object> m = new LinkedHashMap<>();
            for (int i = 0; i < columns.size() && i < row.size(); i++) m.put(columns.get(i), row.get(i));
            out.add(Collections.unmodifiableMap(m));
        }
        return Collections.unmodifiableList(out);
    }
}
