// SPDX-License-Identifier: Apache-2.0
import Digest
import FoundationEssentials
import LarderCore
import MicroHTTP
import Text

/// `GET /`: one HTML page for people: live stores (a page at a time, with
/// sizes, row counts, downloads and a delete button), templates, the last
/// migration check. A script refreshes the live part in place every few
/// seconds. With a token set, a browser signs in first (`signInPage`).
enum Dashboard {
    /// Stores shown per page.
    static let pageSize = 200

    /// Which stores the list shows: `?label_prefix=` and `?template=`, both optional.
    struct Filter: Sendable {
        var labelPrefix: String?
        var template: String?
        var isEmpty: Bool { labelPrefix == nil && template == nil }
        /// The filter as query items, for links that keep it.
        var items: [(StaticString, String?)] { [("label_prefix", labelPrefix), ("template", template)] }
    }

    /// `GET /` (the token check has passed): `?cursor=` pages to older stores, `?label_prefix=` and `?template=` filter them.
    static func show(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let cursor = request.queryValue("cursor")
        func given(_ name: String) -> String? { request.queryValue(name).flatMap { $0.isEmpty ? nil : $0 } }
        let filter = Filter(labelPrefix: given("label_prefix"), template: given("template"))
        return .later { html(200, try page(s, cursor: cursor, filter: filter)) }
    }

    /// An HTML answer, with the headers every page of the dashboard carries.
    static func html(_ status: Int, _ text: String) -> Response {
        var response = Response(status: status, contentType: "text/html; charset=utf-8", bytes: Array(text.utf8))
        response.addHeader("Content-Security-Policy", contentSecurityPolicy)
        response.addHeader("Cache-Control", "no-store")
        response.addHeader("X-Content-Type-Options", "nosniff")
        return response
    }

    // MARK: - The page

    static func page(_ s: ServerContext, cursor: String? = nil, filter: Filter = Filter(), pageSize: Int = Dashboard.pageSize) throws -> String {
        let page = try s.registry.list(labelPrefix: filter.labelPrefix, template: filter.template, limit: pageSize, cursor: cursor)
        return document { h in
            h.append(header(signedIn: s.session != nil))
            // The script refreshes the page in place by swapping this element, found by its id, for a fresh one.
            h.element("main", ["id": "live"]) { h in
                h.append(summary(s))
                h.append(templates(s))
                h.append(templateCache(s.cache))
                h.raw("<h2>Stores</h2>")
                h.append(filterForm(s, filter))
                h.append(paging(page, cursor: cursor, filter: filter))
                if !page.stores.isEmpty { h.append(storeTable(page.stores)) }
                h.append(builds(s.builds.list()))
                if let last = s.lastCheck.withLock({ $0 }) { h.append(lastCheck(last.results, at: last.at)) }
            }
            h.inline(.script)
        }
    }

    /// The status line sits in the header, beside the live part, so its
    /// messages neither shift the list nor go with a refresh.
    static func header(signedIn: Bool) -> HTML {
        HTML { h in
            h.element("header") { h in
                h.raw("<h1>Larder</h1><p id=\"status\" role=\"status\"></p>")
                if signedIn { h.raw("<form method=\"post\" action=\"/sign-out\"><button type=\"submit\">sign out</button></form>") }
            }
        }
    }

    /// The server's version, its live stores, when it started, and links to what else it serves.
    static func summary(_ s: ServerContext) -> HTML {
        HTML { h in
            h.element("p") { h in
                h.text("Larder \(LarderVersion.current) · \(s.registry.count) live store(s) · started \(s.startedAt.rfc3339) · "
                       + storage(s.registry.storage) + " · ")
                h.raw("<a href=\"/openapi.json\">OpenAPI</a> · <a href=\"/metrics\">metrics</a> · <a href=\"/checks/page\">run migration checks</a>")
            }
        }
    }

    /// Whether the root's copies are free or cost every byte, in a few words.
    static func storage(_ storage: Storage) -> String {
        let system = storage.fileSystem.map { "root on \($0)" } ?? "root"
        return system + (storage.sharesBlocks ? ": copies share blocks (no room, no time)" : ": copies are whole (every byte)")
    }

    static func templates(_ s: ServerContext) -> HTML {
        HTML { h in
            h.raw("<h2>Templates</h2>")
            h.element("table") { h in
                h.raw("<tr><th>name</th><th>format</th><th>latest</th><th>fixtures</th><th>snapshots</th></tr>")
                for name in s.catalog.names() {
                    h.element("tr") { h in
                        guard let t = try? s.catalog.template(name) else {
                            h.element("td", text: name)
                            h.element("td", ["colspan": "4", "class": "fail"], text: "cannot be read")
                            return
                        }
                        for column in [t.name, t.migrations.format.rawValue, t.migrations.latest ?? "-",
                                       t.fixtureNames.joined(separator: ", "), t.snapshotNames.joined(separator: ", ")] {
                            h.element("td", text: column)
                        }
                    }
                }
            }
        }
    }

    /// Where each template entry came from: built here, this machine's cache folder, or the fleet's bucket.
    static func templateCache(_ cache: TemplateCache) -> HTML {
        HTML { h in
            let entries = cache.entries(prefix: "").filter { $0.build == nil }.sorted { ($0.template?["name"]?.stringValue ?? "", $0.key) < ($1.template?["name"]?.stringValue ?? "", $1.key) }
            guard !entries.isEmpty else { return }
            h.raw("<h2>Template cache</h2>")
            h.element("table", ["class": "cache"]) { h in
                h.raw("<tr><th>template</th><th>version</th><th>fixtures</th><th>rows</th><th>size</th><th>from</th><th>key</th></tr>")
                for e in entries {
                    h.element("tr") { h in
                        h.element("td", text: e.template?["name"]?.stringValue ?? "")
                        h.element("td", text: e.version ?? "")
                        h.element("td", text: e.template?["fixtures"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? "")
                        h.element("td", ["class": "num"], text: String(e.counts.reduce(Int64(0)) { $0 + $1.1 }))
                        h.element("td", ["class": "num"], text: byteCount(e.size))
                        h.element("td", text: origin(e.origin))
                        h.element("td") { h in h.element("code", text: String(e.key.prefix(12))) }
                    }
                }
            }
        }
    }

    static func origin(_ origin: TemplateCache.Origin) -> String {
        switch origin {
        case .built: return "built here"
        case .machine: return "this machine's cache"
        case .fleet: return "the fleet"
        }
    }

    /// Which stores this page shows, links to the newest and to older ones,
    /// and the button that deletes every store the filter matches.
    static func paging(_ page: StoreRegistry.Page, cursor: String?, filter: Filter) -> HTML {
        let total = page.matching
        // Where this page starts: the stores from the cursor on, counted
        // without opening any of them.
        let first = max(total - page.remaining, 0) + 1
        return HTML { h in
            h.element("p", ["class": "paging"]) { h in
                if page.stores.isEmpty {
                    h.text(total == 0 ? (filter.isEmpty ? "no live stores" : "no stores match") : "no stores on this page (of \(total))")
                } else {
                    h.text("stores \(first)–\(first + page.stores.count - 1) of \(total)" + (filter.isEmpty ? "" : " matching"))
                }
                if cursor != nil {
                    h.text(" · ")
                    h.element("a", ["href": .url("/\(query: filter.items)")], text: "newest")
                }
                if let next = page.nextCursor {
                    h.text(" · ")
                    h.element("a", ["rel": "next", "href": .url("/\(query: filter.items + [("cursor", next)])")], text: "older →")
                }
                // One CI run's stores at once: what DELETE /stores?label_prefix= removes, kept ones too.
                if let prefix = filter.labelPrefix, filter.template == nil, total > 0 {
                    h.text(" · ")
                    h.element("button", ["type": "button", "data-delete-prefix": .text(prefix), "data-count": "\(total)"],
                              text: "delete these \(total) stores")
                }
            }
        }
    }

    static func storeTable(_ stores: [Store]) -> HTML {
        HTML { h in
            h.element("table", ["class": "stores"]) { h in
                h.raw("<tr><th>id</th><th>label</th><th>template</th><th>version</th><th>rows</th><th>size</th>")
                h.raw("<th>created</th><th>expires</th><th>download</th><th></th></tr>")
                for store in stores { h.append(row(store)) }
            }
        }
    }

    /// One store's row. Row counts are those Larder last read: the page
    /// never opens a store's database.
    static func row(_ store: Store) -> HTML {
        let r = store.record
        return HTML { h in
            h.element("tr", ["class": r.keep ? "kept" : nil]) { h in
                h.element("td") { h in
                    h.element("a", ["href": .url("/stores/\(path: r.id)/page")]) { h in h.element("code", text: r.id) }
                }
                h.element("td", ["class": "label"]) { h in
                    if r.keep { h.raw("<span class=\"badge\">kept</span> ") }
                    h.text(r.label ?? "")
                }
                h.element("td") { h in
                    if let build = r.build {
                        h.text("build ")
                        h.element("code", text: build)
                    } else {
                        h.text(r.template ?? "")
                    }
                }
                h.element("td", text: r.version ?? "")
                if let counts = store.lastCounts {
                    let tables = counts.isEmpty ? "no tables" : counts.map { "\($0.0): \($0.1)" }.joined(separator: "\n")
                    h.element("td", ["class": "num", "title": .text(tables)], text: String(counts.reduce(Int64(0)) { $0 + $1.1 }))
                } else {
                    h.raw("<td class=\"num\" title=\"not read yet\">—</td>")
                }
                h.element("td", ["class": "num"], text: byteCount(store.sizeBytes))
                h.element("td") { h in h.append(time(r.createdAt)) }
                h.element("td") { h in h.append(expiry(r)) }
                h.element("td") { h in
                    h.element("a", ["href": .url("/stores/\(path: r.id)/artifact")], text: "zip")
                    h.text(" · ")
                    h.element("a", ["href": .url("/stores/\(path: r.id)/database")], text: "sqlite")
                }
                h.element("td") { h in h.element("button", ["type": "button", "data-delete": .text(r.id)], text: "delete") }
            }
        }
    }

    /// The app-built templates, ready and under way.
    static func builds(_ builds: [BuildRegistry.Info]) -> HTML {
        HTML { h in
            guard !builds.isEmpty else { return }
            h.raw("<h2>Builds</h2>")
            h.element("table", ["class": "builds"]) { h in
                h.raw("<tr><th>key</th><th>state</th><th>label</th><th>version</th><th>rows</th><th>size</th><th>finished</th><th>from</th></tr>")
                for b in builds {
                    h.element("tr") { h in
                        h.element("td") { h in h.element("code", text: b.key) }
                        h.element("td", text: b.state.rawValue)
                        h.element("td", text: b.label ?? "")
                        h.element("td", text: b.version ?? "")
                        h.element("td", ["class": "num"], text: b.counts.map { String($0.reduce(Int64(0)) { $0 + $1.1 }) } ?? "—")
                        h.element("td", ["class": "num"], text: b.sizeBytes.map(byteCount) ?? "—")
                        h.element("td") { h in
                            if let finished = b.finishedAt { h.append(time(finished)) } else { h.text("building") }
                        }
                        h.element("td", text: b.origin.map(origin) ?? "")
                    }
                }
            }
        }
    }

    /// The last run of the migration checks, a line per check.
    static func lastCheck(_ results: [MigrationCheck.Report], at: Timestamp) -> HTML {
        HTML { h in
            h.raw("<h2>Last migration check</h2>")
            h.element("p") { h in
                h.text(at.rfc3339 + " · ")
                h.raw("<a href=\"/checks/page\">run again</a>")
            }
            h.element("table") { h in
                h.raw("<tr><th>template</th><th>check</th><th>from</th><th>to</th><th>result</th></tr>")
                for r in results {
                    h.element("tr") { h in
                        for column in [r.group, r.subject, r.fromVersion ?? "?", r.toVersion ?? "?"] { h.element("td", text: column) }
                        if r.passed {
                            h.raw("<td class=\"pass\">passed</td>")
                        } else {
                            h.element("td", ["class": "fail"], text: r.failures.joined(separator: "; "))
                        }
                    }
                }
            }
        }
    }

    /// The filter of the list: a label prefix and a template, as a GET form.
    static func filterForm(_ s: ServerContext, _ filter: Filter) -> HTML {
        HTML { h in
            h.element("form", ["class": "filter", "method": "get", "action": .url("/")]) { h in
                h.element("label") { h in
                    h.text("label starts with ")
                    h.void("input", ["name": "label_prefix", "value": .text(filter.labelPrefix ?? ""), "placeholder": "RUN/"])
                }
                h.text(" ")
                h.element("label") { h in
                    h.text("template ")
                    h.element("select", ["name": "template"]) { h in
                        h.raw("<option value=\"\">any</option>")
                        for name in s.catalog.names() {
                            h.element("option", ["selected": name == filter.template ? .bare : nil], text: name)
                        }
                    }
                }
                h.raw(" <button type=\"submit\">filter</button>")
                if !filter.isEmpty { h.raw(" <a href=\"/\">all stores</a>") }
            }
        }
    }

    /// `2026-11-22 05:48:35`, the whole RFC 3339 time in a tooltip.
    static func time(_ t: Timestamp) -> HTML {
        let full = t.rfc3339
        return HTML { h in h.element("time", ["datetime": .text(full), "title": .text(full)], text: full.prefix(19).replacing("T", with: " ")) }
    }

    /// When a store goes: a time, or that it is kept.
    static func expiry(_ r: StoreRecord) -> HTML {
        HTML { h in
            if r.keptForever { return h.text("kept forever") }
            if r.keep { h.text("kept, ") }
            h.append(time(r.expiresAt))
        }
    }

    /// `196 KB`, `1.5 MB`: binary units, two or three digits.
    static func byteCount(_ bytes: Int64) -> String {
        guard bytes >= 1024 else { return "\(bytes) B" }
        let units = ["KB", "MB", "GB", "TB", "PB"]
        var value = Double(bytes) / 1024, unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return (value < 10 ? value.fixed(1) : String(Int(value.rounded()))) + " " + units[unit]
    }

    // MARK: - Signing in

    /// The answer to a browser without the token: a form that posts it to
    /// `/sign-in` (never in a URL). `message` says why it is shown again.
    static func signInPage(_ s: ServerContext, request: Request, message: String? = nil) -> Response {
        let stale = (s.session?.values(in: request) ?? []).isEmpty ? nil : "This browser's sign-in is no longer valid (the server restarted?). Sign in again."
        let page = document { h in
            h.raw("<header><h1>Larder</h1></header>")
            h.element("main", ["id": "sign-in"]) { h in
                h.raw("<p>This server needs its token.</p>")
                if let text = message ?? stale { h.element("p", ["class": "fail", "role": "alert"], text: text) }
                h.raw("""
                <form method="post" action="/sign-in"><label>Token <input type="password" name="token" autocomplete="current-password" \
                required autofocus></label> <button type="submit">sign in</button></form>
                """)
            }
        }
        var response = html(401, page)
        response.addHeader("WWW-Authenticate", "Bearer")
        return response
    }

    // MARK: - What every page shares

    /// A whole page: the head every page shares (its style inline), then
    /// what `body` writes in `<body>`.
    static func document(_ body: (inout HTML) throws -> Void) rethrows -> String {
        var h = HTML()
        h.raw("<!doctype html>")
        try h.element("html", ["lang": "en"]) { h in
            h.element("head") { h in
                h.raw("<meta charset=\"utf-8\"><title>Larder</title>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
                h.inline(.style)
            }
            try h.element("body", [:], body)
        }
        h.raw("\n")
        return h.markup
    }

    /// The static parts, package resources compiled into the binary (nothing
    /// to find at run time): `dashboard.css` and `dashboard.js` beside this file.
    static let style = String(decoding: PackageResources.dashboard_css, as: UTF8.self)
    static let script = String(decoding: PackageResources.dashboard_js, as: UTF8.self)

    /// What the pages may do: their own inline style and script (by hash,
    /// so nothing injected runs), fetches and form posts to this server,
    /// and no framing.
    static let contentSecurityPolicy = [
        "default-src 'none'", "style-src \(hashSource(style))", "script-src \(hashSource(script))",
        "connect-src 'self'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'",
    ].joined(separator: "; ")

    static func hashSource(_ text: String) -> String {
        "'sha256-" + Data(SHA256.digest(Array(text.utf8))).base64EncodedString() + "'"
    }
}
