import Foundation
@testable import LarderCore
import SQLite
@testable import LarderServer
import XCTest

/// The dashboard's HTML writer: what it escapes and encodes, and pages
/// built with it holding text that would be markup if it were not.
final class HTMLTests: XCTestCase, RouterTestCase {
    /// Text that ends a cell, opens a script, and closes either quote of an attribute.
    let hostile = #"</td><script>alert("x")</script>&'"#
    let escaped = "&lt;/td&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"

    var root: String!
    var context: ServerContext!
    var router: Router!

    override func tearDownWithError() throws {
        context?.registry.close()
        if let root { try? FileManager.default.removeItem(atPath: root) }
    }

    func testTextIsEscaped() {
        for (text, markup) in [("<script>", "&lt;script&gt;"), ("\"", "&quot;"), ("'", "&#39;"), ("&", "&amp;"), ("</td>", "&lt;/td&gt;")] {
            XCTAssertEqual(HTML(text: text).markup, markup)
        }
        XCTAssertEqual(HTML(text: hostile).markup, escaped)
        XCTAssertEqual(HTML(text: "&amp;").markup, "&amp;amp;", "text is never taken for markup, references neither")
        XCTAssertEqual(HTML(text: "plain · text é").markup, "plain · text é")
        XCTAssertEqual(HTML { $0.element("td", text: hostile) }.markup, "<td>\(escaped)</td>")
        XCTAssertEqual(HTML { h in h.element("tr") { h in h.element("td", text: "</td></tr></table>") } }.markup,
                       "<tr><td>&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;</td></tr>")
    }

    func testAttributeValuesAreEscapedAndQuoted() {
        let td = HTML { $0.element("td", ["class": "num", "title": .text(hostile)], text: "1") }
        XCTAssertEqual(td.markup, "<td class=\"num\" title=\"\(escaped)\">1</td>")
        for quote in ["\"", "'"] {
            let markup = HTML { $0.void("input", ["value": .text(quote + " onfocus=" + quote + "alert(1)")]) }.markup
            XCTAssertFalse(markup.contains(quote + " onfocus"), markup)
        }
        // Interpolated text is text too; nil leaves the attribute out; a bare one has no value.
        XCTAssertEqual(HTML { $0.element("h3", ["id": "t-\(hostile)"], text: "") }.markup, "<h3 id=\"t-\(escaped)\"></h3>")
        XCTAssertEqual(HTML { $0.element("option", ["class": nil, "selected": .bare], text: "a") }.markup, "<option selected>a</option>")
    }

    func testURLsArePercentEncodedThenEscaped() {
        let segment = #"../x?y=1&z#"'<>"#
        let href: Href = "/stores/\(path: segment)/page\(query: [("table", hostile), ("none", nil), ("offset", "40")])#t-\(fragment: "a b")"
        XCTAssertEqual(href.text, "/stores/..%2Fx%3Fy%3D1%26z%23%22%27%3C%3E/page?table=%3C%2Ftd%3E%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E%26%27"
                       + "&offset=40#t-a%20b")
        XCTAssertEqual(HTML { $0.element("a", ["href": .url(href)], text: "x") }.markup,
                       "<a href=\"\(href.text.replacingOccurrences(of: "&", with: "&amp;"))\">x</a>")
        // A value cannot make the link another scheme's: it only ever follows a literal path.
        let script: Href = "/\(path: "javascript:alert(1)")"
        XCTAssertEqual(script.text, "/javascript%3Aalert%281%29")
        XCTAssertEqual(Href.percentEncoded("st_0a-9.~é"), "st_0a-9.~%C3%A9", "unreserved characters stay")
        let none: Href = "/checks/page\(query: [("template", nil)])"
        XCTAssertEqual(none.text, "/checks/page")
    }

    func testRawMarkupAndElementsNest() {
        let markup = HTML { h in
            h.raw("<!doctype html>")
            h.element("p", ["class": "fail"]) { h in
                h.text("a < b ")
                h.raw("<a href=\"/\">home</a>")
                h.append(HTML(text: "&"))
            }
        }.markup
        XCTAssertEqual(markup, "<!doctype html><p class=\"fail\">a &lt; b <a href=\"/\">home</a>&amp;</p>")
    }

    /// A store label, a build's label, a template's name in the checks, a
    /// label filter, and a table, column and values a test wrote: text on every page.
    func testPagesShowHostileTextAsText() throws {
        root = scratchRoot("html")
        var c = serverConfiguration(root: root)
        c.token = "sesame"
        context = try ServerContext(configuration: c)
        router = Router(server: context)
        let bearer = ["authorization": "Bearer sesame"]

        var request = Provisioner.Request()
        request.template = "gallery"
        request.fixtures = ["artists"]
        let (store, _) = try context.provisioner.create(context.provisioner.plan(request), label: hostile, ttlSeconds: nil)
        guard case .build = try context.builds.claim(key: "k", label: hostile) else { return XCTFail("claims it") }
        let report = MigrationCheck.Report(template: hostile, snapshot: hostile, fromVersion: hostile, toVersion: "2", milliseconds: 1,
                                           failures: [hostile])
        context.lastCheck.withLock { $0 = (Timestamp.now, [report]) }
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        let name = hostile.replacingOccurrences(of: "\"", with: "\"\"")
        try db.execute("""
            CREATE TABLE "\(name)" ("\(name)" TEXT PRIMARY KEY);
            INSERT INTO "\(name)" VALUES ('\(hostile.replacingOccurrences(of: "'", with: "''"))');
            UPDATE artists SET name = '\(hostile.replacingOccurrences(of: "'", with: "''"))' WHERE id = 1;
            """)

        let dashboard = router.call("GET", "/", query: [("label_prefix", hostile)], headers: bearer).text
        let storePage = router.call("GET", "/stores/\(store.id)/page", headers: bearer).text
        let chosen = router.call("GET", "/stores/\(store.id)/page", query: [("table", hostile)], headers: bearer).text
        let checks = Dashboard.checksPage([report], at: nil, template: hostile)
        for (what, page) in [("the dashboard", dashboard), ("a store's page", storePage), ("a table's rows", chosen), ("the checks", checks)] {
            XCTAssertFalse(page.contains(hostile), what)
            XCTAssertFalse(page.contains("<script>alert"), what)
            XCTAssertTrue(page.contains(escaped), "\(what): \(page)")
        }
        XCTAssertTrue(dashboard.contains(#"<td class="label">\#(escaped)</td>"#), dashboard)
        XCTAssertTrue(dashboard.contains("<td><code>k</code></td><td>building</td><td>\(escaped)</td>"), "the build's label")
        XCTAssertTrue(dashboard.contains(#"<input name="label_prefix" value="\#(escaped)""#), dashboard)
        XCTAssertTrue(dashboard.contains(#"data-delete-prefix="\#(escaped)""#), dashboard)
        XCTAssertTrue(dashboard.contains("<td>\(escaped)</td><td>\(escaped)</td><td>\(escaped)</td>"), "the last check's template, snapshot, version")
        XCTAssertTrue(storePage.contains("<del>Hilma af Klint</del> → <ins>\(escaped)</ins>"), storePage)
        XCTAssertTrue(storePage.contains(#"<h3 id="t-\#(escaped)">"#), storePage)
        XCTAssertTrue(checks.contains("<h2>\(escaped)</h2>") && checks.contains(#"<li class="fail">\#(escaped)</li>"#), checks)
        XCTAssertTrue(checks.contains("action=\"/checks/page?template=%3C%2Ftd%3E"), checks)
        XCTAssertTrue(chosen.contains("<th>\(escaped)</th>") && chosen.contains("<td>\(escaped)</td>"), chosen)
    }
}
