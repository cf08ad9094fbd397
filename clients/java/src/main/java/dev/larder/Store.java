// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * One isolated SQLite store on a Larder server. Made by {@link Larder#createStore(StoreOptions)}.
 * Thread-safe: the methods are plain HTTP calls (in remote mode, the local copy's steps take turns).
 *
 * <h2>Remote mode</h2>
 * When the client is in {@link Mode#REMOTE} ({@link #isRemote()}), the test cannot open the server's files:
 * the store is checked out when the handle is made ({@code GET /stores/{id}/database}) into a private
 * temporary folder of its own ({@code larder-remote-NNN/store.sqlite}, mode 0700), and {@link #path()} is
 * that local copy. The test works on the copy and hands it back with {@link #checkIn()}
 * ({@code PUT /stores/{id}/database}). Server-side changes keep the two in step: {@link #load},
 * {@link #loadRows}, {@link #loadSql}, {@link #migrate} and {@link #query} check the copy in first when it
 * changed since it was last checked out or in (its size or modification time, or its {@code -wal}'s), and
 * {@link #load}, {@link #migrate}, {@link #reset} and a {@link #query} that changed rows check it out again
 * afterwards, over the copy. The reads ({@link #counts}, {@link #waitFor}, {@link #diff}, {@link #artifact},
 * {@link #info}) see what was last checked in, not the copy as it is. Close your own connections to the copy
 * before {@link #checkIn()}, {@link #reset()} and the other server-side changes: a copy taken while the test
 * writes may be torn, and one replaced under an open connection is not what that connection sees.
 * {@link #close()} and {@link #delete()} remove the local folder.
 */
public final class Store implements AutoCloseable {
    /** How the local copy is named in its folder (the server's zip of a check-in names it so too). */
    static final String LOCAL_NAME = "store.sqlite";

    private final Larder larder;
    private final StoreInfo created;
    /** The local copy in remote mode ({@code larder-remote-NNN/store.sqlite}); null in local mode. */
    private final Path local;
    private volatile StoreInfo last;
    /** The local files as they were at the last check-out or check-in; guarded by {@code this}. */
    private Stamp stamp;
    /** The local folder is gone ({@link #close()}); guarded by {@code this}. */
    private boolean closed;
    /**
     * What must run before this handle's first request, so that the request sees what it did: the relabel of a
     * store {@link TestStores} made ahead (not sent until something could see the label). Null when nothing is
     * pending.
     */
    private Runnable settling; // guarded by settleLock
    private final Object settleLock = new Object();

    Store(Larder larder, StoreInfo created) {
        this(larder, created, null);
    }

    private Store(Larder larder, StoreInfo created, Path local) {
        this.larder = larder;
        this.created = created;
        this.local = local;
        this.last = created;
    }

    /**
     * A handle of {@code created} in remote mode: the store checked out into a new private folder.
     *
     * @throws LarderException when it cannot be checked out (the folder is removed; the store stays)
     */
    static Store checkOut(Larder larder, StoreInfo created) {
        Path dir;
        try {
            dir = Files.createTempDirectory("larder-remote-", PosixFilePermissions.asFileAttribute(
                    PosixFilePermissions.fromString("rwx------")));
        } catch (UnsupportedOperationException e) {
            try {
                dir = Files.createTempDirectory("larder-remote-");
            } catch (IOException io) {
                throw new LarderException(0, "check_out_failed", "cannot make a folder for the copy of store " + created.id() + ": " + io, Map.of(), io);
            }
        } catch (IOException e) {
            throw new LarderException(0, "check_out_failed", "cannot make a folder for the copy of store " + created.id() + ": " + e, Map.of(), e);
        }
        Store store = new Store(larder, created, dir.resolve(LOCAL_NAME));
        try {
            synchronized (store) {
                store.refreshCopy();
            }
        } catch (RuntimeException | Error e) {
            ShippedServer.deleteTree(dir);
            throw e;
        }
        return store;
    }

    /** The store's id ({@code st_...}). */
    public String id() {
        return created.id();
    }

    /**
     * The SQLite file to open with your own driver ({@code "jdbc:sqlite:" + path()}): the server's live file
     * in local mode; in remote mode the local copy ({@link #checkIn()} hands it back), whose folder
     * {@link #close()} and {@link #delete()} remove.
     */
    public Path path() {
        return local != null ? local : created.path();
    }

    /** Whether this store is used in remote mode: {@link #path()} is a local copy ({@link Mode#REMOTE}). */
    public boolean isRemote() {
        return local != null;
    }

    /** The client this store belongs to. */
    public Larder larder() {
        return larder;
    }

    /**
     * The answer this handle was made from: the store as it was then (template, version, counts, links ...).
     * Its {@link StoreInfo#path()} is the server's file, which in remote mode this machine cannot open: use
     * {@link #path()}.
     */
    public StoreInfo created() {
        return created;
    }

    /**
     * The server's last answer about this store, without a request: {@link #created()}, or that of the last
     * {@link #info()}, {@link #keep()}, {@link #reset()} or {@link #checkIn()}. Its {@link StoreInfo#path()} is
     * the server's file.
     */
    public StoreInfo lastInfo() {
        return last;
    }

    /** {@code GET /stores/{id}}: the store as it is now on the server (counts, keep, size, expiry ...). */
    public StoreInfo info() {
        return remember(storeAnswer(larder.call("GET", base(), null, Duration.ZERO)));
    }

    /**
     * {@code PUT /stores/{id}/database}: in remote mode, hands the local copy back; the store's contents on
     * the server become the copy's, all or nothing (its creation state stays, so {@link #diff()},
     * {@link #reset()} and the artifact compare against what the test was given). With a non-empty
     * {@code store.sqlite-wal} beside the copy, the two go as a zip ({@code application/zip}); else the file
     * alone ({@code application/vnd.sqlite3}). A 409 {@code conflict} (something on the server holds a write
     * transaction) is tried again a few times, Retry-After apart. Close your connections to the copy first.
     * Answers the store as the server then describes it ({@link #lastInfo()}). In local mode there is nothing to
     * hand back: it sends nothing and answers {@link #lastInfo()}.
     *
     * @throws LarderException the server's error (400/415/422 not a sound database, 413 too big, 429 over the
     *                         disk limit, 409 {@code conflict} after the last try), or code {@code closed} after
     *                         {@link #close()}, {@code check_in_failed} when the copy cannot be read
     */
    public StoreInfo checkIn() {
        if (local == null) return last;
        synchronized (this) {
            if (closed) {
                throw new LarderException(0, "closed", "the local copy of store " + id() + " was closed: nothing to check in", Map.of("store", id()));
            }
            Stamp before = Stamp.of(local);
            Path wal = sibling("-wal");
            Path zip = null;
            try {
                Object answer;
                if (before.walSize() > 0) {
                    zip = Files.createTempFile(local.getParent(), ".check-in-", ".zip");
                    zipCopy(zip, wal);
                    answer = larder.put(base() + "/database", zip, "application/zip");
                } else {
                    answer = larder.put(base() + "/database", local, "application/vnd.sqlite3");
                }
                stamp = before;
                return remember(storeAnswer(answer));
            } catch (IOException e) {
                throw new LarderException(0, "check_in_failed", "cannot read the local copy of store " + id() + " (" + local + "): " + e, Map.of("store", id()), e);
            } finally {
                if (zip != null) {
                    try {
                        Files.deleteIfExists(zip);
                    } catch (IOException ignored) {
                        // best effort: the folder goes with close()
                    }
                }
            }
        }
    }

    /**
     * Removes the local copy's folder in remote mode (nothing in local mode). The store stays on the server
     * (until {@link #delete()}, or its ttl); this handle still reaches it, without a copy.
     */
    @Override
    public void close() {
        if (local == null) return;
        synchronized (this) {
            closed = true;
            ShippedServer.deleteTree(local.getParent());
        }
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

    /**
     * {@code POST /stores/{id}/query}: one SQL statement with positional {@code ?} parameters. In remote mode
     * the copy is checked in first when it changed, and checked out again when the statement changed rows.
     */
    public QueryResult query(String sql, Object... params) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("sql", sql);
        if (params != null && params.length > 0) body.put("params", Arrays.asList(params));
        checkInIfChanged();
        Map<String, Object> answer = Json.asObject(larder.call("POST", base() + "/query", body, Duration.ZERO), "query");
        List<String> columns = new ArrayList<>();
        for (Object c : Json.asList(answer.get("columns"), "columns")) columns.add(String.valueOf(c));
        List<List<Object>> rows = new ArrayList<>();
        for (Object r : Json.asList(answer.get("rows"), "rows")) rows.add(Json.asList(r, "row"));
        QueryResult result = new QueryResult(columns, rows, Json.number(answer.get("changes")), Boolean.TRUE.equals(answer.get("truncated")));
        if (result.changes() > 0) refresh();
        return result;
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
        checkInIfChanged();
        Map<String, Object> answer = Json.asObject(larder.call("POST", base() + "/fixtures", body, Duration.ZERO), "fixtures");
        List<String> loaded = new ArrayList<>();
        for (Object o : Json.asList(answer.get("loaded"), "loaded")) loaded.add(String.valueOf(o));
        LoadResult result = new LoadResult(loaded, Json.asCounts(answer.get("counts")));
        refresh();
        return result;
    }

    /** {@code POST /stores/{id}/migrate {"to": "latest"}}. */
    public MigrateResult migrate() {
        return migrate("latest");
    }

    /** {@code POST /stores/{id}/migrate {"to": to}}: the versions before and after, and the migrations run. */
    public MigrateResult migrate(String to) {
        checkInIfChanged();
        MigrateResult result = MigrateResult.from(Json.asObject(larder.call("POST", base() + "/migrate", Map.of("to", to), Duration.ZERO), "migrate"));
        refresh();
        return result;
    }

    /**
     * {@code POST /stores/{id}/reset}: contents back to how the store was created (its template, fork or
     * upload, with its creation fixtures), in place: same {@link #path()}, same file, so open connections
     * stay valid. Answers the store, as {@link #info()} does. In remote mode the copy is then checked out
     * again over the local one (what the test wrote to it and did not check in is dropped, as on the server):
     * close your connections to it first.
     */
    public StoreInfo reset() {
        StoreInfo info = remember(storeAnswer(larder.call("POST", base() + "/reset", null, Duration.ZERO)));
        refresh();
        return info;
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
        return remember(storeAnswer(larder.call("PATCH", base(), Map.of("keep", true), Duration.ZERO)));
    }

    /**
     * {@code PATCH /stores/{id} {"keep": true, "label": label}}: {@link #keep()} and the store relabelled, in one
     * request (a test helper's failure path: the kept store carries the test's label); answers the store.
     */
    public StoreInfo keep(String label) {
        dropSettling(); // a relabel still to be sent: this sets the label
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("keep", true);
        body.put("label", label);
        return remember(storeAnswer(larder.call("PATCH", base(), body, Duration.ZERO)));
    }

    /**
     * {@code POST /stores/{id}/check}: this store, an upload the app's migrator migrated, judged; see
     * {@link Larder#check}. In remote mode the copy is checked in first when it changed (the migrator ran on it).
     */
    public CheckResult check(Reference against, CheckOptions options) {
        checkInIfChanged();
        return larder.check(id(), against, options);
    }

    /** {@link #check(Reference, CheckOptions)} with the reference alone. */
    public CheckResult check(Reference against) {
        return check(against, null);
    }

    /** {@code DELETE /stores/{id}}: closes and removes every file of the store; in remote mode the local copy's folder too. */
    public void delete() {
        try {
            larder.call("DELETE", base(), null, Duration.ZERO);
        } finally {
            close();
        }
    }

    // ---------------------------------------------------------------- the local copy (remote mode)

    /** The size and modification time of the copy and of its {@code -wal} (an empty or missing one: 0, null). */
    record Stamp(long size, FileTime modified, long walSize, FileTime walModified) {
        static Stamp of(Path db) {
            BasicFileAttributes file = attributes(db);
            BasicFileAttributes wal = attributes(db.resolveSibling(db.getFileName() + "-wal"));
            boolean hasWal = wal != null && wal.size() > 0;
            return new Stamp(file == null ? -1 : file.size(), file == null ? null : file.lastModifiedTime(),
                    hasWal ? wal.size() : 0, hasWal ? wal.lastModifiedTime() : null);
        }

        private static BasicFileAttributes attributes(Path file) {
            try {
                return Files.readAttributes(file, BasicFileAttributes.class);
            } catch (NoSuchFileException e) {
                return null;
            } catch (IOException e) {
                throw new LarderException(0, "check_in_failed", "cannot read " + file + ": " + e, Map.of(), e);
            }
        }
    }

    /** Whether the local copy changed since it was last checked out or in (always false in local mode). */
    public boolean changedSinceCheckIn() {
        if (local == null) return false;
        synchronized (this) {
            return !closed && !Stamp.of(local).equals(stamp);
        }
    }

    /** In remote mode, {@link #checkIn()} when the copy changed since it was last checked out or in. */
    private void checkInIfChanged() {
        if (local == null) return;
        synchronized (this) {
            if (changedSinceCheckIn()) checkIn();
        }
    }

    /** In remote mode (and not closed), checks the store out again over the local copy. */
    private void refresh() {
        if (local == null) return;
        synchronized (this) {
            if (!closed) refreshCopy();
        }
    }

    /**
     * {@code GET /stores/{id}/database} into a temporary file beside the copy, then: the copy's stale
     * {@code -wal}, {@code -shm} and {@code -journal} removed (before, lest SQLite replay a stale WAL onto the
     * new file), the file renamed over the copy. Called holding {@code this}.
     */
    private void refreshCopy() {
        Path dir = local.getParent();
        Path partial = null;
        try {
            partial = Files.createTempFile(dir, "." + LOCAL_NAME + ".", ".part");
            larder.fetch(base() + "/database", partial);
            for (String suffix : new String[] {"-wal", "-shm", "-journal"}) Files.deleteIfExists(sibling(suffix));
            Files.move(partial, local, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            stamp = Stamp.of(local);
        } catch (IOException e) {
            throw new LarderException(0, "check_out_failed", "cannot write the local copy of store " + id() + " (" + local + "): " + e, Map.of("store", id()), e);
        } finally {
            if (partial != null) {
                try {
                    Files.deleteIfExists(partial);
                } catch (IOException ignored) {
                    // best effort: the folder goes with close()
                }
            }
        }
    }

    private Path sibling(String suffix) {
        return local.resolveSibling(LOCAL_NAME + suffix);
    }

    /** A zip of the copy and its WAL, entries {@code store.sqlite} and {@code store.sqlite-wal}, stored (not compressed). */
    private void zipCopy(Path zip, Path wal) throws IOException {
        try (OutputStream out = Files.newOutputStream(zip); ZipOutputStream z = new ZipOutputStream(out)) {
            z.setMethod(ZipOutputStream.STORED);
            for (Path file : List.of(local, wal)) {
                ZipEntry entry = new ZipEntry(file.getFileName().toString());
                entry.setMethod(ZipEntry.STORED);
                CRC32 crc = new CRC32();
                byte[] buffer = new byte[1 << 16];
                long size = 0;
                try (InputStream in = Files.newInputStream(file)) {
                    for (int n; (n = in.read(buffer)) > 0; size += n) crc.update(buffer, 0, n);
                }
                entry.setSize(size);
                entry.setCompressedSize(size);
                entry.setCrc(crc.getValue());
                z.putNextEntry(entry);
                long copied = 0;
                try (InputStream in = Files.newInputStream(file)) {
                    for (int n; copied < size && (n = in.read(buffer, 0, (int) Math.min(buffer.length, size - copied))) > 0; copied += n) {
                        z.write(buffer, 0, n);
                    }
                }
                if (copied != size) throw new IOException(file + " changed while it was zipped (close every connection to the copy first)");
                z.closeEntry();
            }
        }
    }

    private String base() {
        settled();
        return Larder.storePath(id());
    }

    /** Makes this handle's first request run {@code first} before it ({@link #settling}). */
    void settleFirst(Runnable first) {
        synchronized (settleLock) {
            settling = first;
        }
    }

    /** Runs {@link #settling}, once (it reports its own failure); then nothing. */
    void settled() {
        synchronized (settleLock) {
            Runnable first = settling;
            if (first == null) return;
            settling = null;
            first.run();
        }
    }

    /** Whether {@link #settling} is still to run. */
    boolean unsettled() {
        synchronized (settleLock) {
            return settling != null;
        }
    }

    /** Drops {@link #settling} without running it (waiting for it if it runs now): what it would do no longer matters. */
    void dropSettling() {
        synchronized (settleLock) {
            settling = null;
        }
    }

    private StoreInfo remember(StoreInfo info) {
        last = info;
        return info;
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
        return "Store(" + id() + ", " + path() + (local != null ? ", remote" : "") + ")";
    }
}
