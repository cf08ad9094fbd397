// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * A client of a Larder server.
 *
 * <pre>{@code
 * Larder larder = Larder.fromEnvironment();            // LARDER_URL, LARDER_TOKEN
 * Store store = larder.createStore(StoreOptions.forTemplate("gallery").fixtures("artists"));
 *
 * String key = larder.build("schema-" + hashOfMigrations, path -> runMyMigrator("jdbc:sqlite:" + path));
 * Store copy = larder.createStore(StoreOptions.create().build(key));
 * }</pre>
 *
 * Thread-safe; share one instance. Every failure is a {@link LarderException} (unchecked).
 *
 * <p>A client is in {@link Mode#LOCAL} or {@link Mode#REMOTE} ({@link #mode()}): the constructor's mode, else
 * {@code LARDER_MODE}, else remote for a server whose URL's host is not a loopback address. In remote mode
 * every store it hands out ({@link #createStore}, {@link #store}, {@link #upload}) is checked out into a local
 * copy, its {@link Store#path()}; see {@link Store} ("Remote mode").
 */
public final class Larder {
    /** Where the server listens unless {@code LARDER_URL} says otherwise. */
    public static final String DEFAULT_URL = "http://127.0.0.1:7464";

    // The defaults every Larder client shares (clients/defaults.json; DefaultsTest checks that these agree with it).

    /** How long {@link #build(String, BuildStep)} waits for another caller's build unless told otherwise. */
    public static final Duration DEFAULT_BUILD_TIMEOUT = Duration.ofMinutes(5);

    /** The time limit of one request unless told otherwise: twice the server's default operation limit (60 s). */
    static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(120);

    /** The least time limit of a download (an artifact): the server snapshots the database first. */
    static final Duration DEFAULT_DOWNLOAD_TIMEOUT = Duration.ofMinutes(5);

    /** The longest single long poll of a build (the server's default wait; its limit is higher). */
    static final long BUILD_POLL_MS = 30_000;

    /** How many times a finish that answers 409 {@code conflict} is tried, Retry-After apart. */
    static final int FINISH_ATTEMPTS = 5;

    /** The pause after a 409 without a Retry-After, and the longest one a Retry-After may ask for. */
    static final Duration RETRY_AFTER_DEFAULT = Duration.ofSeconds(1);
    static final Duration RETRY_AFTER_MAX = Duration.ofSeconds(10);

    private final String url;
    private final String token;
    /** Made on first use (downloads, uploads, https): starting one costs a thread and many classes. */
    private volatile HttpClient http;
    /** The JSON calls to an {@code http://} server; null for https, which goes through {@link #http}. */
    private final PlainHttp plain;
    /** The URL's path ("" for none), before each request's path on a plain connection. */
    private final String basePath;
    private final Duration requestTimeout;
    private final Mode mode;

    /**
     * A client of the server at {@code url} ({@link #DEFAULT_URL} when null or blank), sending {@code token} when
     * not null/blank, in the mode of {@code LARDER_MODE} or the URL ({@link Mode#fromEnvironment}).
     *
     * @throws LarderException code {@code bad_mode} when {@code LARDER_MODE} is neither {@code remote} nor {@code local}
     */
    public Larder(String url, String token) {
        this(url, token, DEFAULT_REQUEST_TIMEOUT, null);
    }

    /** As {@link #Larder(String, String)}, in {@code mode} (null: from {@code LARDER_MODE} or the URL), which beats the environment. */
    public Larder(String url, String token, Mode mode) {
        this(url, token, DEFAULT_REQUEST_TIMEOUT, mode);
    }

    /** As {@link #Larder(String, String)}, with the time limit of one request (waits add their own timeout to it). */
    public Larder(String url, String token, Duration requestTimeout) {
        this(url, token, requestTimeout, null);
    }

    /**
     * As {@link #Larder(String, String, Duration)}, in {@code mode}; null takes it from {@code LARDER_MODE},
     * else from the URL (remote when its host is not a loopback address).
     */
    public Larder(String url, String token, Duration requestTimeout, Mode mode) {
        String u = url == null || url.isBlank() ? DEFAULT_URL : url.trim();
        while (u.endsWith("/")) u = u.substring(0, u.length() - 1);
        URI parsed = URI.create(u);
        if (parsed.getScheme() == null || parsed.getHost() == null) {
            throw new IllegalArgumentException("not an http(s) URL: " + url);
        }
        this.url = u;
        this.token = token == null || token.isBlank() ? null : token;
        this.requestTimeout = requestTimeout;
        this.mode = mode != null ? mode : Mode.fromEnvironment(u);
        this.plain = "http".equalsIgnoreCase(parsed.getScheme()) ? new PlainHttp(parsed) : null;
        this.basePath = parsed.getRawPath() == null ? "" : parsed.getRawPath();
    }

    /** The {@code java.net.http} client, made the first time it is needed. */
    private HttpClient http() {
        HttpClient h = http;
        if (h == null) {
            synchronized (this) {
                h = http;
                if (h == null) {
                    h = HttpClient.newBuilder()
                            .version(HttpClient.Version.HTTP_1_1)
                            .connectTimeout(Duration.ofSeconds(10))
                            .followRedirects(HttpClient.Redirect.NEVER)
                            .build();
                    http = h;
                }
            }
        }
        return h;
    }

    /** A client of the server at {@code url}, without a token. */
    public Larder(String url) {
        this(url, null);
    }

    /** A client configured by {@code LARDER_URL} (default {@link #DEFAULT_URL}) and {@code LARDER_TOKEN}. */
    public static Larder fromEnvironment() {
        return new Larder(System.getenv("LARDER_URL"), System.getenv("LARDER_TOKEN"));
    }

    /** Whether the stores of this client are local copies ({@link Mode#REMOTE}) or the server's own files. */
    public Mode mode() {
        return mode;
    }

    /** {@code mode() == Mode.REMOTE}. */
    public boolean isRemote() {
        return mode == Mode.REMOTE;
    }

    /** The server's base URL, without a trailing slash. */
    public String url() {
        return url;
    }

    /** {@code GET /health}: whether the server is ok, its version, how many stores it holds ... */
    public Health health() {
        return Health.from(Json.asObject(call("GET", "/health", null, Duration.ZERO), "health"));
    }

    /** {@code GET /templates}: the templates the server serves, by name. */
    public List<TemplateInfo> templates() {
        Map<String, Object> answer = Json.asObject(call("GET", "/templates", null, Duration.ZERO), "templates");
        List<TemplateInfo> templates = new ArrayList<>();
        for (Object t : Json.asList(answer.get("templates"), "templates")) templates.add(TemplateInfo.from(Json.asObject(t, "template")));
        return List.copyOf(templates);
    }

    /**
     * {@code POST /stores}: a new store as {@code options} describe. A store of a build that is still
     * running waits for it on the server ({@link StoreOptions#buildTimeout}); the request's time limit
     * grows by as much.
     */
    public Store createStore(StoreOptions options) {
        StoreOptions o = options == null ? StoreOptions.create() : options;
        return newStore(call("POST", "/stores", o.toJson(), o.serverWait()));
    }

    /** {@code POST /stores}: a new store from {@code template} with {@code fixtures}. */
    public Store createStore(String template, String... fixtures) {
        return createStore(StoreOptions.forTemplate(template).fixtures(fixtures));
    }

    /** {@code POST /stores} with an empty body: an empty store. */
    public Store createStore() {
        return createStore(StoreOptions.create());
    }

    /**
     * {@code GET /stores/{id}}: an existing store (404 {@code store_not_found} when there is none); in remote
     * mode checked out into a local copy of its own ({@link Store#close()} removes it).
     */
    public Store store(String id) {
        return storeAnswer(call("GET", storePath(id), null, Duration.ZERO));
    }

    // ---------------------------------------------------------------- app-built templates

    /**
     * Makes sure the app-built template {@code key} exists, building it with {@code migrate} when no one
     * has, and answers {@code key}, for {@code createStore(StoreOptions.create().build(key))}. As
     * {@link #build(String, String, Duration, BuildStep)} without a label, waiting at most
     * {@link #DEFAULT_BUILD_TIMEOUT} for another caller's build.
     */
    public String build(String key, BuildStep migrate) {
        return build(key, null, DEFAULT_BUILD_TIMEOUT, migrate);
    }

    /**
     * Makes sure the app-built template {@code key} exists and answers {@code key}. The key is your
     * fingerprint of what goes into the template (e.g. a hash of the migration files):
     * {@code [A-Za-z0-9._-]{1,128}}.
     *
     * <ul>
     * <li>{@code POST /builds}: when the build is ready, that is all.
     * <li>When this caller is the one to build it, {@code migrate} runs on the (empty) file; then
     *     {@code POST /builds/{key}/finish} checks and freezes it (a 409 {@code conflict}, a connection
     *     still writing, is tried again a few times). If {@code migrate} throws, or the finish fails, the
     *     build is discarded ({@code DELETE /builds/{key}}, whose own failure is ignored) so that the next
     *     caller builds it again, and the failure is thrown: a {@code RuntimeException} or {@code Error}
     *     from {@code migrate} as it is, a checked exception wrapped in a {@link LarderException} (status
     *     0, code {@code build_failed}, the exception as its cause).
     * <li>When another caller is building it, waits ({@code GET /builds/{key}?wait=ready}) until it is
     *     ready; when that builder fails instead (or its lease runs out), starts over, and this caller may
     *     then build it.
     * </ul>
     *
     * Many threads or processes may call this at once with the same key: {@code migrate} runs once.
     *
     * @param label   a label for the build (null for none)
     * @param timeout how long to wait for another caller's build (null: {@link #DEFAULT_BUILD_TIMEOUT});
     *                it does not bound this caller's own {@code migrate}
     * @throws LarderTimeoutException when another caller's build is not ready within {@code timeout}
     * @throws LarderException        status 400 for a key that is not allowed, and the server's other errors
     */
    public String build(String key, String label, Duration timeout, BuildStep migrate) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(migrate, "migrate");
        Duration limit = timeout == null ? DEFAULT_BUILD_TIMEOUT : timeout.isNegative() ? Duration.ZERO : timeout;
        long deadline = System.nanoTime() + limit.toNanos();
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("key", key);
        if (label != null) body.put("label", label);
        while (true) {
            PlainHttp.Reply response = sendJson("POST", "/builds", body, Duration.ZERO);
            BuildInfo claimed = BuildInfo.from(Json.asObject(parse(response, "POST", "/builds"), "build"));
            switch (response.status()) {
                case 200:
                    return key;
                case 201:
                    buildAndFinish(key, claimed, migrate);
                    return key;
                case 202:
                    if (awaitBuild(key, deadline, limit)) return key;
                    continue; // its builder failed: claim it again, perhaps to build it here
                default:
                    throw new LarderException(response.status(), "bad_response",
                            "POST /builds answered " + response.status() + ", not 200, 201 or 202", Map.of());
            }
        }
    }

    /** {@code GET /builds}: every build, building or ready. */
    public List<BuildInfo> builds() {
        Map<String, Object> answer = Json.asObject(call("GET", "/builds", null, Duration.ZERO), "builds");
        List<BuildInfo> builds = new ArrayList<>();
        for (Object b : Json.asList(answer.get("builds"), "builds")) builds.add(BuildInfo.from(Json.asObject(b, "build")));
        return List.copyOf(builds);
    }

    /** {@code GET /builds/{key}}: one build (404 {@code unknown_build} when there is none). */
    public BuildInfo buildInfo(String key) {
        return BuildInfo.from(Json.asObject(call("GET", buildPath(key), null, Duration.ZERO), "build"));
    }

    /**
     * {@code DELETE /builds/{key}}: discards a build, ready or building (its waiters then start over); the
     * next {@link #build} of the key builds it again. Stores already made of it stay.
     *
     * @throws LarderException 404 {@code unknown_build} when there is none
     */
    public void discardBuild(String key) {
        call("DELETE", buildPath(key), null, Duration.ZERO);
    }

    // ---------------------------------------------------------------- old databases the app migrates

    /**
     * {@code POST /stores} with the SQLite file {@code file} as the body ({@code application/vnd.sqlite3}):
     * a store that is the file as it is (no template, not migrated), labelled {@code label} (null for none). In
     * remote mode the store is then checked out into a local copy, as the server hardened it.
     *
     * @throws LarderException status 400 for a file that is not a SQLite database
     */
    public Store upload(Path file, String label) {
        String path = "/stores" + (label == null ? "" : "?label=" + encode(label));
        HttpRequest.BodyPublisher body;
        try {
            body = HttpRequest.BodyPublishers.ofFile(file);
        } catch (IOException e) {
            throw new LarderException(0, "upload_failed", "cannot read " + file + ": " + e, Map.of(), e);
        }
        HttpRequest.Builder request = request("POST", path, null, Duration.ZERO)
                .header("Content-Type", "application/vnd.sqlite3")
                .method("POST", body);
        PlainHttp.Reply response = reply(send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8), "POST", path));
        return newStore(parse(response, "POST", path));
    }

    /** {@link #upload(Path, String)} without a label. */
    public Store upload(Path file) {
        return upload(file, null);
    }

    /**
     * {@code POST /stores/{id}/check}: judges store {@code storeId}, an upload the application's own
     * migrator migrated, against {@code against}: {@code before} on the upload as it arrived, integrity, no
     * new foreign-key violations, the schema equal to the reference's, the data kept, the expectations.
     * Answers the result whether the store passed (200) or failed (422).
     *
     * @throws LarderException what cannot be judged: 400 ({@code details().get("reason")} is
     *                         {@code "not_an_upload"} for a store that was not uploaded), 404
     *                         {@code unknown_build} / {@code unknown_template} / {@code unknown_version} /
     *                         {@code store_not_found}, 409 while the build is still building
     */
    public CheckResult check(String storeId, Reference against, CheckOptions options) {
        Objects.requireNonNull(against, "against");
        String path = storePath(storeId) + "/check";
        Map<String, Object> body = (options == null ? CheckOptions.create() : options).toJson(against);
        PlainHttp.Reply response = sendJson("POST", path, body, Duration.ZERO);
        Object answer;
        if (response.status() == 422) {
            try {
                answer = Json.parse(response.body());
            } catch (Json.JsonException e) {
                throw new LarderException(422, "bad_response", "POST " + path + " answered 422 with something that is not JSON", Map.of(), e);
            }
            if (answer instanceof Map<?, ?> m && m.get("error") != null) throw error(422, response.body());
        } else {
            answer = parse(response, "POST", path);
        }
        return CheckResult.from(Json.asObject(answer, "check result"));
    }

    /** {@link #check(String, Reference, CheckOptions)} with the reference alone. */
    public CheckResult check(String storeId, Reference against) {
        return check(storeId, against, null);
    }

    /**
     * Checks one old database the way the application will meet it: uploads {@code file} as a store,
     * runs the check's migrator on the store's file (in remote mode: on its local copy, then checked in), and
     * has the server judge it ({@link #check}) against
     * the check's reference, with the file's name as the snapshot's and the expectations of
     * {@code NAME.expect.json} beside {@code NAME.sqlite} (if there is one; {@link SnapshotCheck#expect}
     * replaces them). A store that passed is deleted; one that failed is kept ({@code PATCH keep}), and the
     * result's {@code storeId()} says which.
     *
     * @throws LarderException code {@code migrate_failed} (status 0, the migrator's exception as its cause,
     *                         the store kept) when the migrator throws an exception; in remote mode the
     *                         server's error of the check-in (the store kept) when the migrated copy is refused;
     *                         the server's error (the store deleted) when the check cannot run
     */
    public CheckResult checkSnapshot(Path file, SnapshotCheck check) {
        BuildStep migrate = check.migrator();
        String name = String.valueOf(file.getFileName());
        Expectations expect = check.expectations() != null ? check.expectations() : readExpect(file);
        Store store = upload(file, check.storeLabel() != null ? check.storeLabel() : name);
        try {
            return migrateAndCheck(store, name, migrate, check, expect);
        } finally {
            store.close(); // remote mode: the local copy goes
        }
    }

    private CheckResult migrateAndCheck(Store store, String name, BuildStep migrate, SnapshotCheck check, Expectations expect) {
        try {
            migrate.run(store.path());
        } catch (Exception e) {
            keepQuietly(store, e);
            if (e instanceof InterruptedException) Thread.currentThread().interrupt();
            throw new LarderException(0, "migrate_failed", name + ": the migrator failed on store " + store.id()
                    + " (kept): " + e, Map.of("snapshot", name, "store", store.id()), e);
        } catch (Error e) {
            keepQuietly(store, e);
            throw e;
        }
        if (store.isRemote()) {
            try {
                store.checkIn();
            } catch (LarderException e) {
                LarderException failure = new LarderException(e.status(), e.code(), name + ": checking in the migrated copy of store "
                        + store.id() + " failed (kept): " + e.getMessage(), e.details(), e);
                keepQuietly(store, failure);
                throw failure;
            }
        }
        CheckResult result;
        try {
            CheckOptions options = CheckOptions.create().snapshot(name).expect(expect);
            if (check.skipsDataCheck()) options.skipDataCheck();
            result = check(store.id(), check.reference(), options);
        } catch (RuntimeException e) {
            try {
                store.delete();
            } catch (LarderException d) {
                e.addSuppressed(d);
            }
            throw e;
        }
        if (result.passed()) {
            store.delete();
        } else {
            store.keep();
        }
        return result.withStore(store.id(), !result.passed());
    }

    /**
     * {@link #checkSnapshot} for every {@code *.sqlite} file of {@code dir} ({@link #snapshotFiles}), one
     * after another in file name order, each with its own {@code NAME.expect.json} (so the check must not
     * set {@code expect} or {@code label}). Answers the results in that order.
     */
    public List<CheckResult> checkSnapshots(Path dir, SnapshotCheck check) {
        check.forDirectory();
        List<CheckResult> results = new ArrayList<>();
        for (Path file : snapshotFiles(dir)) results.add(checkSnapshot(file, check));
        return List.copyOf(results);
    }

    /** The {@code *.sqlite} files of {@code dir}, sorted by name. */
    public static List<Path> snapshotFiles(Path dir) {
        try (var files = Files.list(dir)) {
            return files.filter(f -> f.getFileName().toString().endsWith(".sqlite") && Files.isRegularFile(f))
                    .sorted(java.util.Comparator.comparing(f -> f.getFileName().toString()))
                    .toList();
        } catch (IOException e) {
            throw new LarderException(0, "snapshots_unreadable", "cannot list " + dir + ": " + e, Map.of(), e);
        }
    }

    /** {@code NAME.expect.json} beside {@code NAME.sqlite}, parsed; null when there is none. */
    static Expectations readExpect(Path file) {
        String name = file.getFileName().toString();
        Path expect = file.resolveSibling((name.endsWith(".sqlite") ? name.substring(0, name.length() - 7) : name) + ".expect.json");
        if (!Files.exists(expect)) return null;
        try {
            return Expectations.parse(Files.readString(expect, StandardCharsets.UTF_8));
        } catch (IOException | IllegalArgumentException e) {
            throw new LarderException(0, "bad_expect", expect + ": " + e.getMessage(), Map.of(), e);
        }
    }

    private static void keepQuietly(Store store, Throwable failure) {
        try {
            store.keep();
        } catch (LarderException e) {
            failure.addSuppressed(e);
        }
    }

    /** This caller builds: runs {@code migrate} on the build's file, then finishes it; discards it on any failure. */
    private void buildAndFinish(String key, BuildInfo claimed, BuildStep migrate) {
        if (claimed.path() == null) {
            LarderException e = new LarderException(0, "bad_response",
                    "POST /builds answered 201 for '" + key + "' without a path", Map.of("key", key));
            discardQuietly(key, e);
            throw e;
        }
        if (isRemote()) {
            LarderException e = new LarderException(0, "remote_mode", "building '" + key + "' needs the server's files, which a client "
                    + "in remote mode cannot open: build it where the server runs (or with LARDER_MODE=local there)", Map.of("key", key));
            discardQuietly(key, e);
            throw e;
        }
        try {
            migrate.run(claimed.path());
        } catch (RuntimeException | Error e) {
            discardQuietly(key, e);
            throw e;
        } catch (Exception e) {
            LarderException failure = new LarderException(0, "build_failed",
                    "building '" + key + "' failed: " + e, Map.of("key", key), e);
            discardQuietly(key, failure);
            if (e instanceof InterruptedException) Thread.currentThread().interrupt();
            throw failure;
        }
        String path = buildPath(key) + "/finish";
        for (int attempt = 1; ; attempt++) {
            PlainHttp.Reply response;
            try {
                response = sendJson("POST", path, null, Duration.ZERO);
                if (response.status() == 409 && attempt < FINISH_ATTEMPTS) {
                    pause(response.retryAfter(), "POST " + path);
                    continue;
                }
                parse(response, "POST", path);
                return;
            } catch (LarderException e) {
                discardQuietly(key, e);
                throw e;
            }
        }
    }

    /**
     * Long polls until another caller's build is ready (true) or gone (false: discarded, its builder
     * failed or its lease ran out).
     */
    private boolean awaitBuild(String key, long deadline, Duration limit) {
        while (true) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left <= 0) {
                throw new LarderTimeoutException(408, "timeout", "build '" + key + "' is still being built by another caller after "
                        + limit.toMillis() + " ms", Map.of("key", key, "timeout_ms", limit.toMillis()));
            }
            long ms = Math.min(left, BUILD_POLL_MS);
            try {
                Object answer = call("GET", buildPath(key) + "?wait=ready&timeout_ms=" + ms, null, Duration.ofMillis(ms));
                if (BuildInfo.from(Json.asObject(answer, "build")).isReady()) return true;
            } catch (LarderException e) {
                if (e.status() == 404 && "unknown_build".equals(e.code())) return false;
                if (!(e.status() == 408 && "timeout".equals(e.code()))) throw e;
            }
        }
    }

    /** {@code DELETE /builds/{key}} after a failed build; its own failure only joins {@code failure} as suppressed. */
    private void discardQuietly(String key, Throwable failure) {
        boolean interrupted = Thread.interrupted(); // an interrupted thread still discards
        try {
            discardBuild(key);
        } catch (LarderException e) {
            if (!(e.status() == 404 && "unknown_build".equals(e.code()))) failure.addSuppressed(e);
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /** Sleeps as a 409's Retry-After (seconds) says: {@link #RETRY_AFTER_DEFAULT} without one, at most {@link #RETRY_AFTER_MAX}. */
    private static void pause(String retryAfter, String what) {
        long ms;
        try {
            ms = TimeUnit.SECONDS.toMillis(Long.parseLong(retryAfter.trim()));
        } catch (NumberFormatException e) {
            ms = RETRY_AFTER_DEFAULT.toMillis();
        }
        try {
            Thread.sleep(Math.max(0, Math.min(RETRY_AFTER_MAX.toMillis(), ms)));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LarderException(0, "interrupted", what + " was interrupted", Map.of(), e);
        }
    }

    private Store storeAnswer(Object answer) {
        StoreInfo info = StoreInfo.from(Json.asObject(answer, "store"));
        return isRemote() ? Store.checkOut(this, info) : new Store(this, info);
    }

    /** {@link #storeAnswer} of a store this call made: one that cannot be checked out is deleted again. */
    private Store newStore(Object answer) {
        StoreInfo info = StoreInfo.from(Json.asObject(answer, "store"));
        if (!isRemote()) return new Store(this, info);
        try {
            return Store.checkOut(this, info);
        } catch (RuntimeException e) {
            try {
                call("DELETE", storePath(info.id()), null, Duration.ZERO);
            } catch (LarderException d) {
                e.addSuppressed(d);
            }
            throw e;
        }
    }

    static String buildPath(String key) {
        return "/builds/" + encode(key);
    }

    // ---------------------------------------------------------------- HTTP

    static String storePath(String id) {
        return "/stores/" + encode(id);
    }

    static String encode(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }

    private HttpRequest.Builder request(String method, String path, Object body, Duration extra) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url + path))
                .timeout(requestTimeout.plus(extra))
                .header("Accept", "application/json");
        if (token != null) b.header("Authorization", "Bearer " + token);
        if (body != null) {
            b.header("Content-Type", "application/json; charset=utf-8");
            b.method(method, HttpRequest.BodyPublishers.ofString(Json.write(body), StandardCharsets.UTF_8));
        } else {
            b.method(method, HttpRequest.BodyPublishers.noBody());
        }
        return b;
    }

    /** One JSON call; answers the parsed body (null for an empty one), or throws the server's error. */
    Object call(String method, String path, Object body, Duration extraTimeout) {
        return parse(sendJson(method, path, body, extraTimeout), method, path);
    }

    /**
     * One JSON request; answers the response, whatever its status. To an {@code http://} server it goes over
     * {@link PlainHttp}'s kept-alive sockets, else through {@code java.net.http}.
     */
    private PlainHttp.Reply sendJson(String method, String path, Object body, Duration extraTimeout) {
        if (plain == null) {
            return reply(send(request(method, path, body, extraTimeout),
                    HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8), method, path));
        }
        if (Thread.interrupted()) {
            Thread.currentThread().interrupt();
            throw new LarderException(0, "interrupted", method + " " + url + path + " was interrupted", Map.of());
        }
        try {
            PlainHttp.Request r = plainRequest(new Call(method, path, body, extraTimeout));
            return plain.exchange(r.method(), r.target(), r.body(), r.contentType(), r.headers(), r.timeout());
        } catch (IOException e) {
            throw connectionFailed(method, path, e);
        }
    }

    /** {@code call} as a request on a plain connection: JSON, with the client's token. */
    private PlainHttp.Request plainRequest(Call call) {
        String headers = "Accept: application/json\r\n" + (token == null ? "" : "Authorization: Bearer " + token + "\r\n");
        byte[] body = call.body() == null ? null : Json.write(call.body()).getBytes(StandardCharsets.UTF_8);
        return new PlainHttp.Request(call.method(), basePath + call.path(), body, body == null ? null : "application/json; charset=utf-8",
                headers, requestTimeout.plus(call.extraTimeout()));
    }

    /** A request that failed below HTTP. */
    private LarderException connectionFailed(String method, String path, IOException e) {
        return new LarderException(0, "connection_failed", method + " " + url + path + " failed: " + e, Map.of(), e);
    }

    /**
     * A JSON request sent now whose answer is read later, by {@link Deferred#answer}: to an {@code http://}
     * server the request is written on a connection of its own and this call returns; to an https one it is made
     * now. For {@link TestStores}: the server works while the test runs, and no thread is handed anything.
     */
    Deferred send(String method, String path, Object body, Duration extraTimeout) {
        return sendAll(List.of(new Call(method, path, body, extraTimeout))).get(0);
    }

    /** A request for {@link #sendAll}. */
    record Call(String method, String path, Object body, Duration extraTimeout) {}

    /**
     * {@link #send} of several requests at once: to an {@code http://} server they go on one connection in one
     * write (pipelined), and the server is woken once for all of them.
     */
    List<Deferred> sendAll(List<Call> calls) {
        List<Deferred> out = new ArrayList<>();
        if (plain == null || Thread.currentThread().isInterrupted()) {
            for (Call c : calls) {
                Deferred d = new Deferred(c.method(), c.path(), null);
                try {
                    d.result = call(c.method(), c.path(), c.body(), c.extraTimeout());
                } catch (LarderException e) {
                    d.failure = e;
                }
                out.add(d);
            }
            return out;
        }
        List<PlainHttp.Request> requests = new ArrayList<>();
        for (Call c : calls) requests.add(plainRequest(c));
        try {
            List<PlainHttp.Exchange> exchanges = plain.startAll(requests);
            for (int i = 0; i < calls.size(); i++) out.add(new Deferred(calls.get(i).method(), calls.get(i).path(), exchanges.get(i)));
        } catch (IOException e) {
            for (Call c : calls) {
                Deferred d = new Deferred(c.method(), c.path(), null);
                d.failure = connectionFailed(c.method(), c.path(), e);
                out.add(d);
            }
        }
        return out;
    }

    /** A request {@link #send} sent: its answer, read once. Thread-safe. */
    final class Deferred {
        private final String method;
        private final String path;
        private final PlainHttp.Exchange exchange;
        private Object result; // guarded by this
        private LarderException failure; // guarded by this
        private boolean read; // guarded by this

        private Deferred(String method, String path, PlainHttp.Exchange exchange) {
            this.method = method;
            this.path = path;
            this.exchange = exchange;
            this.read = exchange == null;
        }

        /** Whether {@link #answer} would not wait. */
        boolean arrived() {
            return exchange == null || exchange.arrived();
        }

        /** The parsed answer of a 2xx (null for an empty one), waiting for it; or the error thrown (every time). */
        Object answer() {
            return answer(0);
        }

        /** {@link #answer()}, waiting at most {@code maxWaitMs} for each read (0: the request's own limit). */
        synchronized Object answer(int maxWaitMs) {
            if (!read) {
                read = true;
                try {
                    result = parse(exchange.finish(maxWaitMs), method, path);
                } catch (IOException e) {
                    failure = connectionFailed(method, path, e);
                } catch (LarderException e) {
                    failure = e;
                }
            }
            if (failure != null) throw failure;
            return result;
        }

        /** The answer as a store of this client (local mode). */
        Store store() {
            return new Store(Larder.this, StoreInfo.from(Json.asObject(answer(), "store")));
        }

        @Override
        public String toString() {
            return method + " " + path;
        }
    }

    private static PlainHttp.Reply reply(HttpResponse<String> response) {
        return new PlainHttp.Reply(response.statusCode(), response.body(), response.headers().firstValue("Retry-After").orElse(""));
    }

    /** The parsed body of a 2xx response (null for an empty one), or the server's error thrown. */
    private static Object parse(PlainHttp.Reply response, String method, String path) {
        if (response.status() / 100 != 2) throw error(response.status(), response.body());
        String text = response.body();
        if (text == null || text.isBlank()) return null;
        try {
            return Json.parse(text);
        } catch (Json.JsonException e) {
            throw new LarderException(response.status(), "bad_response",
                    method + " " + path + " answered something that is not JSON: " + e.getMessage(), Map.of(), e);
        }
    }

    /** Streams a 2xx body into {@code file} (through a temporary file next to it), or throws the server's error. */
    Path download(String path, Path file) {
        Path target = file.toAbsolutePath();
        Path partial = null;
        try {
            if (target.getParent() != null) Files.createDirectories(target.getParent());
            partial = Files.createTempFile(target.getParent(), "." + target.getFileName(), ".part");
            fetch(path, partial);
            Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            return target;
        } catch (IOException e) {
            throw new LarderException(0, "connection_failed", "GET " + path + " into " + file + ": " + e, Map.of(), e);
        } finally {
            if (partial != null) {
                try {
                    Files.deleteIfExists(partial);
                } catch (IOException ignored) {
                    // best effort
                }
            }
        }
    }

    /** The time limit of a download or an upload of a whole database: at least {@link #DEFAULT_DOWNLOAD_TIMEOUT}. */
    private Duration transferTimeout() {
        return requestTimeout.compareTo(DEFAULT_DOWNLOAD_TIMEOUT) > 0 ? requestTimeout : DEFAULT_DOWNLOAD_TIMEOUT;
    }

    /** Streams the 2xx body of {@code GET path} into {@code file} (replacing what it holds), or throws the server's error. */
    void fetch(String path, Path file) {
        HttpResponse<InputStream> response = send(request("GET", path, null, Duration.ZERO).timeout(transferTimeout()).header("Accept", "*/*"),
                HttpResponse.BodyHandlers.ofInputStream(), "GET", path);
        try (InputStream in = response.body()) {
            if (response.statusCode() / 100 != 2) {
                throw error(response.statusCode(), new String(in.readAllBytes(), StandardCharsets.UTF_8));
            }
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new LarderException(0, "connection_failed", "GET " + path + " into " + file + ": " + e, Map.of(), e);
        }
    }

    /**
     * {@code PUT path} with {@code file} as the body of type {@code contentType}; a 409 is sent again (up to
     * {@link #FINISH_ATTEMPTS} times, Retry-After apart). Answers the parsed body, or throws the server's error.
     */
    Object put(String path, Path file, String contentType) {
        for (int attempt = 1; ; attempt++) {
            HttpRequest.BodyPublisher body;
            try {
                body = HttpRequest.BodyPublishers.ofFile(file);
            } catch (IOException e) {
                throw new LarderException(0, "check_in_failed", "cannot read " + file + ": " + e, Map.of(), e);
            }
            HttpRequest.Builder request = request("PUT", path, null, Duration.ZERO).timeout(transferTimeout())
                    .header("Content-Type", contentType)
                    .method("PUT", body);
            PlainHttp.Reply response = reply(send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8), "PUT", path));
            if (response.status() == 409 && attempt < FINISH_ATTEMPTS) {
                pause(response.retryAfter(), "PUT " + path);
                continue;
            }
            return parse(response, "PUT", path);
        }
    }

    private <T> HttpResponse<T> send(HttpRequest.Builder request, HttpResponse.BodyHandler<T> handler,
                                     String method, String path) {
        try {
            return http().send(request.build(), handler);
        } catch (IOException e) {
            throw connectionFailed(method, path, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LarderException(0, "interrupted", method + " " + url + path + " was interrupted", Map.of(), e);
        }
    }

    private static LarderException error(int status, String body) {
        try {
            Object parsed = Json.parse(body);
            if (parsed instanceof Map<?, ?> m && m.get("error") instanceof Map<?, ?> err) {
                Object code = err.get("code"), message = err.get("message"), details = err.get("details");
                return new LarderException(status, code instanceof String c ? c : "unknown",
                        message instanceof String s ? s : "HTTP " + status,
                        details instanceof Map<?, ?> ? Json.asObject(details, "details") : Map.of());
            }
        } catch (Json.JsonException ignored) {
            // not the API's error body; fall through
        }
        String text = body == null ? "" : body.strip();
        if (text.length() > 500) text = text.substring(0, 500) + "...";
        return new LarderException(status, "http_" + status, "HTTP " + status + (text.isEmpty() ? "" : ": " + text), Map.of());
    }

    @Override
    public String toString() {
        return "Larder(" + url + (token != null ? ", with token" : "") + (mode == Mode.REMOTE ? ", remote" : "") + ")";
    }
}
