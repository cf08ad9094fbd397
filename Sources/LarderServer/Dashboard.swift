import LarderCore

/// `GET /`: one HTML page for people: live stores, templates, the last
/// migration check, and download links.
enum Dashboard {
    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func page(_ s: Services) -> String {
        var html = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Larder</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
        td,th{border-bottom:1px solid #ddd;padding:.3em .8em;text-align:left}th{background:#f4f4f4}code{font-size:90%}
        .pass{color:#17702a}.fail{color:#b00020}</style></head><body>
        <h1>Larder</h1><p>Larder \(LarderVersion.current) · \(s.registry.count) live store(s) · started \(s.startedAt.rfc3339) ·
        <a href="/openapi.json">OpenAPI</a> · <a href="/metrics">metrics</a> · <a href="/checks/migrations">run migration checks</a></p>
        <h2>Templates</h2><table><tr><th>name</th><th>format</th><th>latest</th><th>fixtures</th><th>snapshots</th></tr>
        """
        for name in s.catalog.names() {
            if let t = try? s.catalog.template(name) {
                html += "<tr><td>\(escape(t.name))</td><td>\(t.migrations.format.rawValue)</td><td>\(escape(t.migrations.latest ?? "-"))</td>"
                html += "<td>\(escape(t.fixtureNames.joined(separator: ", ")))</td><td>\(escape(t.snapshotNames.joined(separator: ", ")))</td></tr>"
            } else {
                html += "<tr><td>\(escape(name))</td><td colspan=4 class=fail>cannot be read</td></tr>"
            }
        }
        html += "</table><h2>Stores</h2><table><tr><th>id</th><th>label</th><th>template</th><th>version</th><th>created</th><th>expires</th><th>download</th></tr>"
        let stores = (try? s.registry.list(limit: 200).stores) ?? []
        for store in stores {
            let r = store.record
            html += "<tr><td><code>\(r.id)</code></td><td>\(escape(r.label ?? ""))</td><td>\(escape(r.template ?? ""))</td><td>\(escape(r.version ?? ""))</td>"
            html += "<td>\(r.createdAt.rfc3339)</td><td>\(r.keep ? "kept" : r.expiresAt.rfc3339)</td>"
            html += "<td><a href=\"/stores/\(r.id)/artifact\">zip</a> · <a href=\"/stores/\(r.id)/database\">sqlite</a></td></tr>"
        }
        html += "</table>"
        if let last = s.lastCheck.withLock({ $0 }) {
            html += "<h2>Last migration check</h2><p>\(last.at.rfc3339)</p><table><tr><th>template</th><th>snapshot</th><th>from</th><th>to</th><th>result</th></tr>"
            for r in last.results {
                html += "<tr><td>\(escape(r.template))</td><td>\(escape(r.snapshot))</td><td>\(escape(r.fromVersion ?? "?"))</td><td>\(escape(r.toVersion ?? "?"))</td>"
                html += r.passed ? "<td class=pass>passed</td></tr>" : "<td class=fail>\(escape(r.failures.joined(separator: "; ")))</td></tr>"
            }
            html += "</table>"
        }
        return html + "</body></html>\n"
    }
}
