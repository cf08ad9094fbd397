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
    /// The routes whose answer is a page: a browser without the token gets the sign-in page there.
    static let pages: Set<String> = ["/", "/stores/{id}/page", "/checks/page"]

    /// Text for HTML, in one pass over its bytes.
    static func escape(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "&"): out += Array("&amp;".utf8)
            case UInt8(ascii: "<"): out += Array("&lt;".utf8)
            case UInt8(ascii: ">"): out += Array("&gt;".utf8)
            case UInt8(ascii: "\""): out += Array("&quot;".utf8)
            case UInt8(ascii: "'"): out += Array("&#39;".utf8)
            default: out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Which stores the list shows: `?label_prefix=` and `?template=`, both optional.
    struct Filter: Sendable {
        var labelPrefix: String?
        var template: String?
        var isEmpty: Bool { labelPrefix == nil && template == nil }
        /// The filter as query items, for links that keep it.
        var query: String {
            [("label_prefix", labelPrefix), ("template", template)].compactMap { name, value in
                value.map { "\(name)=\(percentEncoded($0))" }
            }.joined(separator: "&")
        }
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
        let total = page.matching
        // Where this page starts: the stores from the cursor on, counted
        // without opening any of them.
        let first = max(total - page.remaining, 0) + 1

        // The status line sits in the header, beside the live part, so its
        // messages neither shift the list nor go with a refresh.
        var html = head + "<header><h1>Larder</h1><p id=\"status\" role=\"status\"></p>"
        if s.session != nil {
            html += "<form method=\"post\" action=\"/sign-out\"><button type=\"submit\">sign out</button></form>"
        }
        html += "</header><main id=\"live\">"
        html += "<p>Larder \(escape(LarderVersion.current)) · \(s.registry.count) live store(s) · started \(s.startedAt.rfc3339) · "
        html += "<a href=\"/openapi.json\">OpenAPI</a> · <a href=\"/metrics\">metrics</a> · <a href=\"/checks/page\">run migration checks</a></p>"

        html += "<h2>Templates</h2><table><tr><th>name</th><th>format</th><th>latest</th><th>fixtures</th><th>snapshots</th></tr>"
        for name in s.catalog.names() {
            if let t = try? s.catalog.template(name) {
                html += "<tr><td>\(escape(t.name))</td><td>\(escape(t.migrations.format.rawValue))</td><td>\(escape(t.migrations.latest ?? "-"))</td>"
                html += "<td>\(escape(t.fixtureNames.joined(separator: ", ")))</td><td>\(escape(t.snapshotNames.joined(separator: ", ")))</td></tr>"
            } else {
                html += "<tr><td>\(escape(name))</td><td colspan=\"4\" class=\"fail\">cannot be read</td></tr>"
            }
        }
        html += "</table>"

        html += "<h2>Stores</h2>" + filterForm(s, filter) + "<p class=\"paging\">"
        if page.stores.isEmpty {
            html += total == 0 ? (filter.isEmpty ? "no live stores" : "no stores match") : "no stores on this page (of \(total))"
        } else {
            html += "stores \(first)–\(first + page.stores.count - 1) of \(total)" + (filter.isEmpty ? "" : " matching")
        }
        let keep = filter.query
        if cursor != nil { html += " · <a href=\"/\(keep.isEmpty ? "" : "?" + escape(keep))\">newest</a>" }
        if let next = page.nextCursor {
            html += " · <a rel=\"next\" href=\"/?\(keep.isEmpty ? "" : escape(keep) + "&amp;")cursor=\(escape(percentEncoded(next)))\">older →</a>"
        }
        // One CI run's stores at once: what DELETE /stores?label_prefix= removes, kept ones too.
        if let prefix = filter.labelPrefix, filter.template == nil, total > 0 {
            html += " · <button type=\"button\" data-delete-prefix=\"\(escape(prefix))\" data-count=\"\(total)\">delete these \(total) stores</button>"
        }
        html += "</p>"
        if !page.stores.isEmpty {
            html += "<table class=\"stores\"><tr><th>id</th><th>label</th><th>template</th><th>version</th><th>rows</th><th>size</th>"
            html += "<th>created</th><th>expires</th><th>download</th><th></th></tr>"
            for store in page.stores { html += row(store) }
            html += "</table>"
        }

        let builds = s.builds.list()
        if !builds.isEmpty {
            html += "<h2>Builds</h2><table class=\"builds\"><tr><th>key</th><th>state</th><th>label</th><th>version</th><th>rows</th><th>size</th><th>finished</th></tr>"
            for b in builds {
                html += "<tr><td><code>\(escape(b.key))</code></td><td>\(escape(b.state.rawValue))</td><td>\(escape(b.label ?? ""))</td>"
                html += "<td>\(escape(b.version ?? ""))</td><td class=\"num\">\(b.counts.map { String($0.reduce(Int64(0)) { $0 + $1.1 }) } ?? "—")</td>"
                html += "<td class=\"num\">\(b.sizeBytes.map(byteCount) ?? "—")</td><td>\(b.finishedAt.map(time) ?? "building")</td></tr>"
            }
            html += "</table>"
        }

        if let last = s.lastCheck.withLock({ $0 }) {
            html += "<h2>Last migration check</h2><p>\(last.at.rfc3339) · <a href=\"/checks/page\">run again</a></p><table><tr><th>template</th><th>check</th><th>from</th><th>to</th><th>result</th></tr>"
            for r in last.results {
                html += "<tr><td>\(escape(r.group))</td><td>\(escape(r.subject))</td><td>\(escape(r.fromVersion ?? "?"))</td><td>\(escape(r.toVersion ?? "?"))</td>"
                html += r.passed ? "<td class=\"pass\">passed</td></tr>" : "<td class=\"fail\">\(escape(r.failures.joined(separator: "; ")))</td></tr>"
            }
            html += "</table>"
        }
        return html + "</main><script>" + script + "</script></body></html>\n"
    }

    /// One store's row. Row counts are those Larder last read: the page
    /// never opens a store's database.
    static func row(_ store: Store) -> String {
        let r = store.record
        let id = escape(r.id)
        var html = "<tr\(r.keep ? " class=\"kept\"" : "")><td><a href=\"/stores/\(id)/page\"><code>\(id)</code></a></td>"
        html += "<td class=\"label\">\(r.keep ? "<span class=\"badge\">kept</span> " : "")\(escape(r.label ?? ""))</td>"
        html += "<td>\(r.build.map { "build <code>\(escape($0))</code>" } ?? escape(r.template ?? ""))</td><td>\(escape(r.version ?? ""))</td>"
        if let counts = store.lastCounts {
            let tables = counts.isEmpty ? "no tables" : counts.map { "\($0.0): \($0.1)" }.joined(separator: "\n")
            html += "<td class=\"num\" title=\"\(escape(tables))\">\(counts.reduce(Int64(0)) { $0 + $1.1 })</td>"
        } else {
            html += "<td class=\"num\" title=\"not read yet\">—</td>"
        }
        html += "<td class=\"num\">\(byteCount(store.sizeBytes))</td>"
        html += "<td>\(time(r.createdAt))</td><td>\(r.keptForever ? "kept forever" : (r.keep ? "kept, " : "") + time(r.expiresAt))</td>"
        html += "<td><a href=\"/stores/\(id)/artifact\">zip</a> · <a href=\"/stores/\(id)/database\">sqlite</a></td>"
        html += "<td><button type=\"button\" data-delete=\"\(id)\">delete</button></td></tr>"
        return html
    }

    /// The filter of the list: a label prefix and a template, as a GET form.
    static func filterForm(_ s: ServerContext, _ filter: Filter) -> String {
        var html = "<form class=\"filter\" method=\"get\" action=\"/\"><label>label starts with "
        html += "<input name=\"label_prefix\" value=\"\(escape(filter.labelPrefix ?? ""))\" placeholder=\"RUN/\"></label> "
        html += "<label>template <select name=\"template\"><option value=\"\">any</option>"
        for name in s.catalog.names() {
            html += "<option\(name == filter.template ? " selected" : "")>\(escape(name))</option>"
        }
        html += "</select></label> <button type=\"submit\">filter</button>"
        if !filter.isEmpty { html += " <a href=\"/\">all stores</a>" }
        return html + "</form>"
    }

    /// `2026-11-22 05:48:35`, the whole RFC 3339 time in a tooltip.
    static func time(_ t: Timestamp) -> String {
        let full = t.rfc3339
        let short = full.prefix(19).replacing("T", with: " ")
        return "<time datetime=\"\(full)\" title=\"\(full)\">\(short)</time>"
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

    /// A query value as it goes into a URL, every byte but ASCII letters and
    /// digits as %XX (the cursor is digits, but the page must not trust that).
    static func percentEncoded(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - Signing in

    /// The answer to a browser without the token: a form that posts it to
    /// `/sign-in` (never in a URL). `message` says why it is shown again.
    static func signInPage(_ s: ServerContext, request: Request, message: String? = nil) -> Response {
        let stale = (s.session?.values(in: request) ?? []).isEmpty ? nil : "This browser's sign-in is no longer valid (the server restarted?). Sign in again."
        var html = head + "<header><h1>Larder</h1></header><main id=\"sign-in\"><p>This server needs its token.</p>"
        if let text = message ?? stale { html += "<p class=\"fail\" role=\"alert\">\(escape(text))</p>" }
        html += """
        <form method="post" action="/sign-in"><label>Token <input type="password" name="token" autocomplete="current-password" \
        required autofocus></label> <button type="submit">sign in</button></form></main></body></html>

        """
        var response = self.html(401, html)
        response.addHeader("WWW-Authenticate", "Bearer")
        return response
    }

    // MARK: - What every page shares

    static let head = """
    <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Larder</title>
    <meta name="viewport" content="width=device-width, initial-scale=1"><style>\(style)</style></head><body>
    """

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
