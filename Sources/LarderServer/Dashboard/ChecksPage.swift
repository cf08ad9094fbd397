// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `GET /checks/page`: the migration checks of the fixtures folder, run now
/// and shown as a page (what `GET /checks/migrations` answers as JSON): a
/// table per template, each check's failures and notes under it.
extension Dashboard {
    static func checksPage(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let run = try CheckRoutes.checks(c.server, template: request.queryValue("template"))
        return .later {
            let results = try run()
            return html(results.allSatisfy(\.passed) ? 200 : 422, checksPage(results))
        }
    }

    static func checksPage(_ results: [MigrationCheck.Report]) -> String {
        let failed = results.filter { !$0.passed }.count
        var html = head + "<header><h1><a href=\"/\">Larder</a> · migration checks</h1></header><main>"
        html += "<p class=\"\(failed == 0 ? "pass" : "fail")\">\(results.count - failed) passed, \(failed) failed · "
        html += "<a href=\"/checks/migrations\">JSON</a> · <a href=\"/checks/migrations?format=junit\">JUnit XML</a></p>"
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
