// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `GET /checks/page`: the last run of the migration checks of the fixtures
/// folder as a page (what `GET /checks/migrations` answers as JSON), a table
/// per template, each check's failures and notes under it, and a button that
/// runs them again. A GET starts no work: any page, an `<img>` of another
/// site's included, can make a browser GET a URL. `POST /checks/page` (the
/// button, a form of this page: another site's is refused by its Origin)
/// runs them, then sends the browser back to the page.
extension Dashboard {
    static func checksPage(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let template = request.queryValue("template")
        if let template { _ = try c.server.catalog.template(template) }
        let last = c.server.lastCheck.withLock { $0 }
        return .now(html(200, checksPage(last.map { $0.results.filter { template == nil || $0.template == template } }, at: last?.at,
                                         template: template)))
    }

    static func runChecks(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let template = request.queryValue("template")
        let run = try CheckRoutes.checks(c.server, template: template)
        return .later {
            _ = try run()
            let back = "/checks/page" + (template.map { "?template=" + percentEncoded($0) } ?? "")
            return Response(status: 303, headers: [("Location", back), ("Cache-Control", "no-store")])
        }
    }

    /// The page of `results` (nil: no run yet), run at `at`; its button runs `template`'s, or all.
    static func checksPage(_ results: [MigrationCheck.Report]?, at: Timestamp? = nil, template: String? = nil) -> String {
        let action = "/checks/page" + (template.map { "?template=" + escape(percentEncoded($0)) } ?? "")
        let button = "<form method=\"post\" action=\"\(action)\"><button type=\"submit\">run the migration checks"
            + (template.map { " of " + escape($0) } ?? "") + "</button></form>"
        guard let results else {
            return head + "<header><h1><a href=\"/\">Larder</a> · migration checks</h1></header><main>"
                + "<p>no check has run since the server started</p>" + button + "</main></body></html>\n"
        }
        return checksPage(results, at: at, button: button)
    }

    static func checksPage(_ results: [MigrationCheck.Report], at: Timestamp? = nil, button: String = "") -> String {
        let failed = results.filter { !$0.passed }.count
        var html = head + "<header><h1><a href=\"/\">Larder</a> · migration checks</h1></header><main>"
        html += "<p class=\"\(failed == 0 ? "pass" : "fail")\">\(results.count - failed) passed, \(failed) failed · "
        if let at { html += "run \(at.rfc3339) · " }
        html += "<a href=\"/checks/migrations\">JSON</a> · <a href=\"/checks/migrations?format=junit\">JUnit XML</a></p>"
        html += button
        if results.isEmpty { html += "<p>nothing to check: no template has snapshots or down migrations</p>" }
        var groups: [String] = []
        for r in results where !groups.contains(r.group) { groups.append(r.group) }
        for group in groups {
            html += "<h2>\(escape(group))</h2><table class=\"checks\"><tr><th>check</th><th>from</th><th>to</th><th>ms</th><th>result</th></tr>"
            for r in results where r.group == group {
                html += "<tr><td>\(escape(r.title))</td><td>\(escape(r.fromVersion ?? "—"))</td><td>\(escape(r.toVersion ?? "—"))</td>"
                html += "<td class=\"num\">\(Int(r.milliseconds.rounded()))</td>"
                html += r.passed ? "<td class=\"pass\">passed</td>" : "<td class=\"fail\">failed</td>"
                html += "</tr>"
                let lines = r.failures.map { "<li class=\"fail\">\(escape($0))</li>" } + r.notes.map { "<li>note: \(escape($0))</li>" }
                if !lines.isEmpty { html += "<tr><td colspan=\"5\"><ul>\(lines.joined())</ul></td></tr>" }
            }
            html += "</table>"
        }
        return html + "</main></body></html>\n"
    }
}
