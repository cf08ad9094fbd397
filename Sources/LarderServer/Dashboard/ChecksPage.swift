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
            let back: Href = "/checks/page\(query: [("template", template)])"
            return Response(status: 303, headers: [("Location", back.text), ("Cache-Control", "no-store")])
        }
    }

    /// The page of `results` (nil: no run yet), run at `at`; its button runs `template`'s, or all.
    static func checksPage(_ results: [MigrationCheck.Report]?, at: Timestamp? = nil, template: String? = nil) -> String {
        let button = HTML { h in
            h.element("form", ["method": "post", "action": .url("/checks/page\(query: [("template", template)])")]) { h in
                h.element("button", ["type": "submit"]) { h in
                    h.text("run the migration checks")
                    if let template { h.text(" of " + template) }
                }
            }
        }
        guard let results else {
            return document { h in
                h.raw("<header><h1><a href=\"/\">Larder</a> · migration checks</h1></header>")
                h.element("main") { h in
                    h.raw("<p>no check has run since the server started</p>")
                    h.append(button)
                }
            }
        }
        return checksPage(results, at: at, button: button)
    }

    static func checksPage(_ results: [MigrationCheck.Report], at: Timestamp? = nil, button: HTML = HTML()) -> String {
        let failed = results.filter { !$0.passed }.count
        var groups: [String] = []
        for r in results where !groups.contains(r.group) { groups.append(r.group) }
        return document { h in
            h.raw("<header><h1><a href=\"/\">Larder</a> · migration checks</h1></header>")
            h.element("main") { h in
                h.element("p", ["class": failed == 0 ? "pass" : "fail"]) { h in
                    h.text("\(results.count - failed) passed, \(failed) failed · ")
                    if let at { h.text("run \(at.rfc3339) · ") }
                    h.raw("<a href=\"/checks/migrations\">JSON</a> · <a href=\"/checks/migrations?format=junit\">JUnit XML</a>")
                }
                h.append(button)
                if results.isEmpty { h.raw("<p>nothing to check: no template has snapshots or down migrations</p>") }
                for group in groups { h.append(checks(of: group, results.filter { $0.group == group })) }
            }
        }
    }

    /// One template's checks, a row each, its failures and notes in a row under it.
    static func checks(of group: String, _ results: [MigrationCheck.Report]) -> HTML {
        HTML { h in
            h.element("h2", text: group)
            h.element("table", ["class": "checks"]) { h in
                h.raw("<tr><th>check</th><th>from</th><th>to</th><th>ms</th><th>result</th></tr>")
                for r in results {
                    h.element("tr") { h in
                        for column in [r.title, r.fromVersion ?? "—", r.toVersion ?? "—"] { h.element("td", text: column) }
                        h.element("td", ["class": "num"], text: String(Int(r.milliseconds.rounded())))
                        h.raw(r.passed ? "<td class=\"pass\">passed</td>" : "<td class=\"fail\">failed</td>")
                    }
                    guard !r.failures.isEmpty || !r.notes.isEmpty else { continue }
                    h.element("tr") { h in
                        h.element("td", ["colspan": "5"]) { h in
                            h.element("ul") { h in
                                for failure in r.failures { h.element("li", ["class": "fail"], text: failure) }
                                for note in r.notes { h.element("li", text: "note: " + note) }
                            }
                        }
                    }
                }
            }
        }
    }
}
