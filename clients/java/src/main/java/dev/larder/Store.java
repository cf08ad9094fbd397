// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

/**
 * One isolated SQLite store on a Larder server. Made by {@link Larder#createStore(StoreOptions)}.
 * Thread-safe: the methods are plain HTTP calls.
 */
public final class Store {
    private final Larder larder;
    private final StoreInfo created;

    Store(Larder larder, StoreInfo created) {
        this.larder = larder;
        this.created = created;
    }

    /** The store's id ({@code st_...}). */
    public String id() {
        return created.id();
    }

    /** The live SQLite file, for code on the same machine to open with its own driver ({@code "jdbc:sqlite:" + path()}). */
    public Path path() {
        return created.path();
    }

    /** The client this store belongs to. */
    public Larder larder() {
        return larder;
    }

    /** The answer this handle was made from: the store as it was then (template, version, counts, links ...). */
    public StoreInfo created() {
        return created;
    }

    /** {@code GET /stores/{id}}: the store as it is now (counts, keep, size, expiry ...). */
    public StoreInfo info() {
        return storeAnswer(larder.call("GET", base(), null, Duration.ZERO));
    }

    /** {@code GET /stores/{id}/counts}: rows per user table, or only the tables named. */
    public Map<String, Long> counts(String... tables) {
        String q = tables.length == 0 ? "" : "?tables=" + joinTables(tables);
        return Json.asCounts(Json.asObject(larder.call("GET", base() + "/counts" + q, null, Duration.ZERO), "counts").get("counts"));
    }

    /**
     * Waits (a long poll on the server) until {@code condition} holds, e.g. {@code "artworks>=13"}
     * (operators {@code >= > = <= <}), and answers the counts then.
     *
     * @throws LarderTimeoutException when it does not hold within {@code timeout}; it carries the last counts
     */
    public Map<String, Long> waitFor(String condition, Duration timeout) {
        long ms = Math.max(0, timeout.toMillis());
        String q = "?wait=" + Larder.encode(condition) + "&timeout_ms=" + ms;
        try {
            return Json.asCounts(Json.asObject(
                    larder.call("GET", base() + "/counts" + q, null, Duration.ofMillis(ms)), "counts").get("counts"));
        } catch (LarderTimeoutException e) {
            throw e;
        } catch (LarderException e) {
            if (e.status() == 408 && "timeout".equals(e.code())) {
                Map<String, Long> last = Json.asCounts(e.details().get("counts"));
                throw new LarderTimeoutException(e.status(), e.code(), e.getMessage(), e.details(), condition, last);
            }
            throw e;
        }
    }

    /** As {@link #waitFor(String, Duration)}, with the timeout in milliseconds. */
    public Map<String, Long> waitFor(String condition, long timeoutMillis) {
        return waitFor(condition, Duration.ofMillis(timeoutMillis));
    }

    /** {@code POST /stores/{id}/query}: one SQL statement with positional {@code ?} parameters. */
    public QueryResult query(String sql, Object... params) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("sql", sql);
        if (params != null && params.length > 0) body.put("params", Arrays.asList(params));
        Map<String, Object> answer = Json.asObject(larder.call("POST", base() + "/query", body, Duration.ZERO), "query");
        List<String> columns = new ArrayList<>();
        for (Object c : Json.asList(answer.get("columns"), "columns")) columns.add(String.valueOf(c));
        List<List<Object>> rows = new ArrayList<>();
        for (Object r : Json.asList(answer.get("rows"), "rows")) rows.add(Json.asList(r, "row"));
        return new QueryResult(columns, rows, Json.number(answer.get("changes")), Boolean.TRUE.equals(answer.get("truncated")));
    }

    /** {@code POST /stores/{id}/fixtures {"fixtures": [...]}}: the template's named data fixtures, in order. */
    public LoadResult load(String... fixtures) {
        return loadBody(Map.of("fixtures", Arrays.asList(fixtures)));
    }

    /** {@code POST /stores/{id}/fixtures {"rows": {...}}}: rows per table, e.g. {@code Map.of("artists", List.of(Map.of("name", "Hokusai")))}. */
    public LoadResult loadRows(Map<String, ? extends List<? extends Map<String, ?>>> rows) {
        return loadBody(Map.of("rows", rows));
    }

    /** {@code POST /stores/{id}/fixtures {"sql": "..."}}: inline SQL, all or nothing. */
    public LoadResult loadSql(String sql) {
        return loadBody(Map.of("sql", sql));
    }

    private LoadResult loadBody(Map<String, Object> body) {
        Map<String, Object> answer = Json.asObject(larder.call("POST", base() + "/fixtures", body, Duration.ZERO), "fixtures");
        List<String> loaded = new ArrayList<>();
        for (Object o : Json.asList(answer.get("loaded"), "loaded")) loaded.add(String.valueOf(o));
        return new LoadResult(loaded, Json.asCounts(answer.get("counts")));
    }

    /** {@code POST /stores/{id}/migrate {"to": "latest"}}. */
    public MigrateResult migrate() {
        return migrate("latest");
    }

    /** {@code POST /stores/{id}/migrate {"to": to}}: the versions before and after, and the migrations run. */
    public MigrateResult migrate(String to) {
        return MigrateResult.from(Json.asObject(larder.call("POST", base() + "/migrate", Map.of("to", to), Duration.ZERO), "migrate"));
    }

    /**
     * {@code POST /stores/{id}/reset}: contents back to how the store was created (its template, fork or
     * upload, with its creation fixtures), in place: same {@link #path()}, same file, so open connections
     * stay valid. Answers the store, as {@link #info()} does.
     */
    public StoreInfo reset() {
        return storeAnswer(larder.call("POST", base() + "/reset", null, Duration.ZERO));
    }

    /**
     * {@code GET /stores/{id}/diff}: what changed since the store was created, in every table or only
     * the tables named, with at most 100 rows listed per table (the server's default).
     *
     * @throws LarderException status 400 for a table that is in neither the store nor its base
     */
    public DiffResult diff(String... tables) {
        return diffQuery(tables.length == 0 ? "" : "?tables=" + joinTables(tables));
    }

    /**
     * As {@link #diff(String...)}, listing at most {@code limit} rows per table (0..10000; 0 lists none).
     * The counts stay whole; {@link DiffResult.TableDiff#truncated()} says that rows were left out.
     */
    public DiffResult diff(int limit, String... tables) {
        return diffQuery("?limit=" + limit + (tables.length == 0 ? "" : "&tables=" + joinTables(tables)));
    }

    private DiffResult diffQuery(String query) {
        return DiffResult.from(Json.asObject(larder.call("GET", base() + "/diff" + query, null, Duration.ZERO), "diff"));
    }

    /** {@code GET /stores/{id}/artifact}: streams the zip (store.sqlite, manifest.json ..., and its creation state
     *  base.sqlite, so that {@code larder open} shows what the test changed) into {@code file}; answers its absolute path. */
    public Path artifact(Path file) {
        return larder.download(base() + "/artifact?base=true", file);
    }

    /** {@code PATCH /stores/{id} {"keep": true}}: the store outlives its ttl until deleted; answers the store. */
    public StoreInfo keep() {
        return storeAnswer(larder.call("PATCH", base(), Map.of("keep", true), Duration.ZERO));
    }

    /** {@code POST /stores/{id}/check}: this store, an upload the app's migrator migrated, judged; see {@link Larder#check}. */
    public CheckResult check(Reference against, CheckOptions options) {
        return larder.check(id(), against, options);
    }

    /** {@link #check(Reference, CheckOptions)} with the reference alone. */
    public CheckResult check(Reference against) {
        return larder.check(id(), against, null);
    }

    /** {@code DELETE /stores/{id}}: closes and removes every file of the store. */
    public void delete() {
        larder.call("DELETE", base(), null, Duration.ZERO);
    }

    private String base() {
        return Larder.storePath(id());
    }

    private static StoreInfo storeAnswer(Object answer) {
        return StoreInfo.from(Json.asObject(answer, "store"));
    }

    private static String joinTables(String... tables) {
        StringJoiner j = new StringJoiner(",");
        for (String t : tables) j.add(Larder.encode(t));
        return j.toString();
    }

    @Override
    public String toString() {
        return "Store(" + id() + ", " + path() + ")";
    }
}
