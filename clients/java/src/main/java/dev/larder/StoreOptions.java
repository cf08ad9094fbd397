// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What {@link Larder#createStore(StoreOptions)} asks for. Fluent; only the fields that are set are
 * sent (the server refuses unknown fields and nulls where they are not allowed).
 *
 * <pre>{@code
 * StoreOptions.create().template("gallery").fixtures("artists", "artworks").label("my test")
 * StoreOptions.forTemplate("gallery").version("3")
 * }</pre>
 */
public final class StoreOptions {
    /** The server's {@code timeout_ms} for a store of a build when none is sent. */
    static final long DEFAULT_BUILD_WAIT_MS = 30_000;

    private String template;
    private List<String> fixtures;
    private String version;
    private boolean versionSet;
    private String snapshot;
    private String label;
    private String build;
    private String from;
    private Integer ttlSeconds;
    private Duration buildTimeout;

    private StoreOptions() {}

    /** Empty options: an empty store unless something is set. */
    public static StoreOptions create() {
        return new StoreOptions();
    }

    /** Options for a store built from a template (at its latest version unless {@link #version} says). */
    public static StoreOptions forTemplate(String template) {
        return new StoreOptions().template(template);
    }

    /** The template (a sub-folder of the server's fixtures directory). */
    public StoreOptions template(String template) {
        this.template = template;
        return this;
    }

    /** Data fixtures applied in order after migrating. */
    public StoreOptions fixtures(String... fixtures) {
        this.fixtures = new ArrayList<>(Arrays.asList(fixtures));
        return this;
    }

    /** Data fixtures applied in order after migrating. */
    public StoreOptions fixtures(List<String> fixtures) {
        this.fixtures = new ArrayList<>(fixtures);
        return this;
    }

    /**
     * The version to migrate to ({@code "latest"} by default on the server). With a snapshot,
     * {@code version(null)} sends {@code "version": null}: keep the snapshot as it is.
     */
    public StoreOptions version(String version) {
        this.version = version;
        this.versionSet = true;
        return this;
    }

    /** Start from {@code fixtures/<template>/snapshots/NAME.sqlite}. */
    public StoreOptions snapshot(String snapshot) {
        this.snapshot = snapshot;
        return this;
    }

    /** A label for the store (lists, dashboards, {@code DELETE /stores?label=}). */
    public StoreOptions label(String label) {
        this.label = label;
        return this;
    }

    /**
     * The key of an app-built template ({@link Larder#build(String, BuildStep)}, {@code POST /builds}): the
     * store is a copy of it. While that build is still running the server waits for it (see
     * {@link #buildTimeout}). Not with template, snapshot, version or from.
     */
    public StoreOptions build(String build) {
        this.build = build;
        return this;
    }

    /**
     * With {@link #build}: how long the server waits while the build is still running (JSON field
     * {@code timeout_ms}; the server's default is 30 s, its limit 300 s unless configured), then answers
     * 408 {@code timeout}. The request's own time limit is extended by as much.
     */
    public StoreOptions buildTimeout(Duration timeout) {
        this.buildTimeout = timeout;
        return this;
    }

    /**
     * The id of a live store to fork (JSON field {@code from}): the new store starts as a copy of it, then
     * {@link #fixtures} apply. Not with template, snapshot, version or build.
     */
    public StoreOptions from(String storeId) {
        this.from = storeId;
        return this;
    }

    /** A live store to fork; as {@link #from(String)} with its id. */
    public StoreOptions from(Store store) {
        this.from = store.id();
        return this;
    }

    /** How long the store lives unless kept. */
    public StoreOptions ttlSeconds(int ttlSeconds) {
        this.ttlSeconds = ttlSeconds;
        return this;
    }

    public String template() {
        return template;
    }

    public List<String> fixtures() {
        return fixtures == null ? null : List.copyOf(fixtures);
    }

    public String label() {
        return label;
    }

    /** A copy: what a helper changes (the label) does not change the caller's options. */
    StoreOptions copy() {
        StoreOptions o = new StoreOptions();
        o.template = template;
        o.fixtures = fixtures == null ? null : new ArrayList<>(fixtures);
        o.version = version;
        o.versionSet = versionSet;
        o.snapshot = snapshot;
        o.label = label;
        o.build = build;
        o.from = from;
        o.ttlSeconds = ttlSeconds;
        o.buildTimeout = buildTimeout;
        return o;
    }

    /** A fork ({@link #from}): a copy of a live store as it is at that moment, which cannot be made ahead. */
    boolean isFork() {
        return from != null;
    }

    /** How long the server may hold the request waiting for a build (0 without one): added to the request's time limit. */
    Duration serverWait() {
        if (build == null) return Duration.ZERO;
        if (buildTimeout == null) return Duration.ofMillis(DEFAULT_BUILD_WAIT_MS);
        return buildTimeout.isNegative() ? Duration.ZERO : buildTimeout;
    }

    /** The request body: only the fields that were set. */
    Map<String, Object> toJson() {
        Map<String, Object> body = new LinkedHashMap<>();
        if (template != null) body.put("template", template);
        if (versionSet) body.put("version", version);
        if (snapshot != null) body.put("snapshot", snapshot);
        if (fixtures != null) body.put("fixtures", fixtures);
        if (label != null) body.put("label", label);
        if (build != null) body.put("build", build);
        if (from != null) body.put("from", from);
        if (ttlSeconds != null) body.put("ttl_seconds", ttlSeconds);
        if (buildTimeout != null) body.put("timeout_ms", Math.max(0, buildTimeout.toMillis()));
        return body;
    }

    @Override
    public String toString() {
        return "StoreOptions" + Json.write(toJson());
    }
}
