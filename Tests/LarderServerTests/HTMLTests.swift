import Foundation
@testable import LarderCore
import SQLite
@testable import LarderServer
import XCTest

/// The dashboard's HTML writer: what it escapes and encodes.
final class HTMLTests: XCTestCase {
    /// Text that ends a cell, opens a script, and closes either quote of an attribute.
    let hostile = #"</td><script>alert("x")</script>&'"#
    let escaped = "&lt;/td&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"

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
}
