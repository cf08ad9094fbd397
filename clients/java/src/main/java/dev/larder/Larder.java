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
import java.util.Map;

/**
 * A client of a Larder server.
 *
 * <pre>{@code
 * Larder larder = Larder.fromEnvironment();            // LARDER_URL, LARDER_TOKEN
 * Store store = larder.createStore(StoreOptions.forTemplate("gallery").fixtures("artists"));
 * }</pre>
 *
 * Thread-safe; share one instance. Every failure is a {@link LarderException} (unchecked).
 */
public final class Larder {
    /** Where the server listens unless {@code LARDER_URL} says otherwise. */
    public static final String DEFAULT_URL = "http://127.0.0.1:7464";

    static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(120);

    private final String url;
    private final String token;
    private final HttpClient http;
    private final Duration requestTimeout;

    /** A client of the server at {@code url} ({@link #DEFAULT_URL} when null or blank), sending {@code token} when not null/blank. */
    public Larder(String url, String token) {
        this(url, token, DEFAULT_REQUEST_TIMEOUT);
    }

    /** As {@link #Larder(String, String)}, with the time limit of one request (waits add their own timeout to it). */
    public Larder(String url, String token, Duration requestTimeout) {
        String u = url == null || url.isBlank() ? DEFAULT_URL : url.trim();
        while (u.endsWith("/")) u = u.substring(0, u.length() - 1);
        URI parsed = URI.create(u);
        if (parsed.getScheme() == null || parsed.getHost() == null) {
            throw new IllegalArgumentException("not an http(s) URL: " + url);
        }
        this.url = u;
        this.token = token == null || token.isBlank() ? null : token;
        this.requestTimeout = requestTimeout;
        this.http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(10))
                .followRedirects(HttpClient.Redirect.NEVER)
                .build();
    }

    /** A client of the server at {@code url}, without a token. */
    public Larder(String url) {
        this(url, null);
    }

    /** A client configured by {@code LARDER_URL} (default {@link #DEFAULT_URL}) and {@code LARDER_TOKEN}. */
    public static Larder fromEnvironment() {
        return new Larder(System.getenv("LARDER_URL"), System.getenv("LARDER_TOKEN"));
    }

    /** The server's base URL, without a trailing slash. */
    public String url() {
        return url;
    }

    /** {@code GET /health}. */
    public Map<String, Object> health() {
        return Json.asObject(call("GET", "/health", null, Duration.ZERO), "health");
    }

    /** {@code GET /templates}: {@code {"templates": [...]}}. */
    public Map<String, Object> templates() {
        return Json.asObject(call("GET", "/templates", null, Duration.ZERO), "templates");
    }

    /** {@code POST /stores}: a new store as {@code options} describe. */
    public Store createStore(StoreOptions options) {
        Map<String, Object> info = Json.asObject(
                call("POST", "/stores", (options == null ? StoreOptions.create() : options).toJson(), Duration.ZERO),
                "store");
        return new Store(this, info);
    }

    /** {@code POST /stores}: a new store from {@code template} with {@code fixtures}. */
    public Store createStore(String template, String... fixtures) {
        return createStore(StoreOptions.forTemplate(template).fixtures(fixtures));
    }

    /** {@code POST /stores} with an empty body: an empty store. */
    public Store createStore() {
        return createStore(StoreOptions.create());
    }

    /** {@code GET /stores/{id}}: an existing store (404 {@code store_not_found} when there is none). */
    public Store store(String id) {
        return new Store(this, Json.asObject(call("GET", storePath(id), null, Duration.ZERO), "store"));
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
        HttpResponse<String> response = send(request(method, path, body, extraTimeout),
                HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8), method, path);
        if (response.statusCode() / 100 != 2) throw error(response.statusCode(), response.body());
        String text = response.body();
        if (text == null || text.isBlank()) return null;
        try {
            return Json.parse(text);
        } catch (Json.JsonException e) {
            throw new LarderException(response.statusCode(), "bad_response",
                    method + " " + path + " answered something that is not JSON: " + e.getMessage(), Map.of(), e);
        }
    }

    /** Streams a 2xx body into {@code file} (through a temporary file next to it), or throws the server's error. */
    Path download(String path, Path file) {
        HttpResponse<InputStream> response = send(request("GET", path, null, Duration.ZERO).header("Accept", "*/*"),
                HttpResponse.BodyHandlers.ofInputStream(), "GET", path);
        try (InputStream in = response.body()) {
            if (response.statusCode() / 100 != 2) {
                throw error(response.statusCode(), new String(in.readAllBytes(), StandardCharsets.UTF_8));
            }
            Path target = file.toAbsolutePath();
            if (target.getParent() != null) Files.createDirectories(target.getParent());
            Path partial = Files.createTempFile(target.getParent(), "." + target.getFileName(), ".part");
            try {
                Files.copy(in, partial, StandardCopyOption.REPLACE_EXISTING);
                Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } finally {
                Files.deleteIfExists(partial);
            }
            return target;
        } catch (IOException e) {
            throw new LarderException(0, "connection_failed", "GET " + path + " into " + file + ": " + e, Map.of(), e);
        }
    }

    private <T> HttpResponse<T> send(HttpRequest.Builder request, HttpResponse.BodyHandler<T> handler,
                                     String method, String path) {
        try {
            return http.send(request.build(), handler);
        } catch (IOException e) {
            throw new LarderException(0, "connection_failed",
                    method + " " + url + path + " failed: " + e, Map.of(), e);
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
        return "Larder(" + url + (token != null ? ", with token" : "") + ")";
    }
}
