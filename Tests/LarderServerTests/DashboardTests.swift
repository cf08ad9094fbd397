import Foundation
@testable import LarderCore
import MicroHTTP
import SQLite
@testable import LarderServer
import XCTest

/// The dashboard and the browser's sign-in, without sockets (the browser
/// test, Tests/blackbox/test_dashboard.py, drives them over real HTTP).
final class DashboardTests: XCTestCase, RouterTestCase {
    var root: String!
    var context: ServerContext!
    var router: Router!

    override func setUpWithError() throws {
        root = scratchRoot("dashboard")
        router = try makeRouter { $0.token = "sesame" }
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: root) }

    func makeRouter(_ configure: (inout Configuration) -> Void) throws -> Router {
        var c = serverConfiguration(root: root)
        configure(&c)
        context?.registry.close() // the root is one server's at a time
        context = try ServerContext(configuration: c)
        context.session?.bind(base: c.publicURL ?? "http://127.0.0.1:8123") // as a started server does
        return Router(server: context)
    }

    let bearer = ["authorization": "Bearer sesame"]
    let form = ["content-type": "application/x-www-form-urlencoded"]

    func signIn(_ body: String) -> RouterAnswer { call("POST", "/sign-in", headers: form, body: body) }

    func testA401IsWhatTheOperationDeclaresAndTheDocumentSays() throws {
        let document = try XCTUnwrap(try JSONValue.parse(context.openAPI))
        for (method, path, form) in [("GET", "/", true), ("GET", "/checks/page", true), ("GET", "/stores/st_x/page", true),
                                     ("POST", "/checks/page", false), ("GET", "/stores", false)] {
            let answer = call(method, path)
            XCTAssertEqual(answer.status, 401, "\(method) \(path)")
            XCTAssertEqual(answer.code == nil, form, "\(method) \(path): the sign-in form, or the JSON error")
            let documented = path.replacingOccurrences(of: "st_x", with: "{id}")
            let said = document["paths"]?[documented]?[method.lowercased()]?["responses"]?["401"]?["content"]
            XCTAssertEqual(said?["text/html"] != nil, form, "the document says what \(method) \(documented) answers")
        }
    }

    func testTheDashboardWithoutTheTokenIsASignInForm() {
        let answer = call("GET", "/")
        XCTAssertEqual(answer.status, 401)
        XCTAssertEqual(answer.header("content-type"), "text/html; charset=utf-8")
        XCTAssertTrue(answer.text.contains(#"<form method="post" action="/sign-in">"#), answer.text)
        XCTAssertTrue(answer.text.contains(#"<input type="password" name="token""#), answer.text)
        XCTAssertNotNil(answer.header("content-security-policy"))
        XCTAssertEqual(call("HEAD", "/").status, 401)
        // Every other route keeps the contract's JSON error.
        XCTAssertEqual(call("GET", "/stores").code, "unauthorized")
        XCTAssertEqual(call("GET", "/metrics").code, "unauthorized")
        XCTAssertEqual(call("GET", "/sign-in").code, "unauthorized", "only POST /sign-in is open")
    }

    func testSignInWithTheWrongTokenShowsTheFormAgain() {
        let answer = signIn("token=open+sesame")
        XCTAssertEqual(answer.status, 401)
        XCTAssertNil(answer.header("set-cookie"))
        XCTAssertTrue(answer.text.contains("not this server&#39;s token"), answer.text)
        XCTAssertTrue(answer.text.contains(#"action="/sign-in""#))
        XCTAssertEqual(signIn("token=sesam").status, 401)
        XCTAssertEqual(signIn("token=sesame%20").status, 401)
    }

    func testSignInSetsACookieThatIsNotTheTokenAndPassesTheTokenCheck() throws {
        let answer = signIn("token=s%65same")
        XCTAssertEqual(answer.status, 303)
        XCTAssertEqual(answer.header("location"), "/")
        let setCookie = try XCTUnwrap(answer.header("set-cookie"))
        let attributes = setCookie.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertTrue(attributes[0].hasPrefix("larder_session_8123="), setCookie)
        let value = String(attributes[0].dropFirst("larder_session_8123=".count))
        XCTAssertEqual(value.count, 64, "hex SHA-256")
        XCTAssertFalse(value.contains("sesame"))
        XCTAssertTrue(attributes.contains("HttpOnly"), setCookie)
        XCTAssertTrue(attributes.contains("SameSite=Strict"), setCookie)
        XCTAssertTrue(attributes.contains("Path=/"), setCookie)
        XCTAssertFalse(attributes.contains("Secure"), "plain http: the browser would drop a Secure cookie")

        let cookie = "theme=dark; " + attributes[0]
        let made = call("POST", "/stores", headers: ["cookie": cookie, "content-type": "application/json"], body: "{}")
        XCTAssertEqual(made.status, 201)
        let id = try XCTUnwrap((try? JSONValue.parse(Array(made.text.utf8)))?["id"]?.stringValue)
        XCTAssertEqual(call("GET", "/stores/" + id, headers: ["cookie": cookie]).status, 200)
        XCTAssertEqual(call("GET", "/", headers: ["cookie": cookie]).status, 200)
        XCTAssertEqual(call("GET", "/openapi.json", headers: ["cookie": cookie]).status, 200)
        XCTAssertEqual(call("DELETE", "/stores/" + id, headers: ["cookie": cookie]).status, 204)
        XCTAssertEqual(call("GET", "/stores", headers: ["cookie": "larder_session_8123=" + String(value.reversed())]).code, "unauthorized")
        XCTAssertEqual(call("GET", "/stores", headers: ["cookie": "larder_session_8123=sesame"]).code, "unauthorized", "the token is not the cookie")
        // A cookie of an earlier run (another secret) shows the form with a word on why.
        let stale = call("GET", "/", headers: ["cookie": "larder_session_8123=" + String(repeating: "0", count: 64)])
        XCTAssertEqual(stale.status, 401)
        XCTAssertTrue(stale.text.contains("no longer valid"), stale.text)
        // Browsers keep cookies per host, not per port: another server's
        // cookie on this host is another name, neither admitted nor stale.
        let neighbour = call("GET", "/", headers: ["cookie": "larder_session_8124=" + value])
        XCTAssertEqual(neighbour.status, 401)
        XCTAssertFalse(neighbour.text.contains("no longer valid"), neighbour.text)
    }

    func testSignOutClearsTheCookie() {
        let answer = call("POST", "/sign-out", headers: form)
        XCTAssertEqual(answer.status, 303)
        XCTAssertEqual(answer.header("location"), "/")
        let setCookie = answer.header("set-cookie") ?? ""
        XCTAssertTrue(setCookie.hasPrefix("larder_session_8123=;"), setCookie)
        XCTAssertTrue(setCookie.contains("Max-Age=0"), setCookie)
        XCTAssertEqual(call("POST", "/sign-out", headers: form, body: "token=x").code, "bad_request")
    }

    func testTheCookieIsSecureBehindHTTPS() throws {
        router = try makeRouter { $0.token = "sesame"; $0.publicURL = "https://larder.example.org" }
        let answer = signIn("token=sesame")
        XCTAssertEqual(answer.status, 303)
        XCTAssertTrue(answer.header("set-cookie")?.hasSuffix("; Secure") == true, answer.header("set-cookie") ?? "")
        XCTAssertTrue(answer.header("set-cookie")?.hasPrefix("larder_session_443=") == true, "named for the port browsers reach")
    }

    func testBadSignInFormsAreContractErrors() {
        XCTAssertEqual(signIn("").code, "bad_request", "no token field")
        XCTAssertEqual(signIn("token=").code, "bad_request")
        XCTAssertEqual(signIn("token=a&token=b").code, "bad_request")
        XCTAssertEqual(signIn("token=sesame&user=me").code, "bad_request")
        XCTAssertEqual(signIn("token=%4").code, "bad_request")
        XCTAssertEqual(signIn("token=%zz").code, "bad_request")
        XCTAssertEqual(signIn("token=%ff%fe").code, "bad_request", "not UTF-8")
        XCTAssertEqual(signIn("token=" + String(repeating: "a", count: 1025)).code, "bad_request")
        XCTAssertEqual(signIn("token=" + String(repeating: "a", count: 17000)).code, "payload_too_large")
        XCTAssertEqual(signIn("token=" + String(repeating: "%F0%9F%94%91", count: 1024)).status, 401, "the longest token fits")
        XCTAssertEqual(call("POST", "/sign-in", headers: ["content-type": "application/json"], body: #"{"token": "sesame"}"#).code, "unsupported_media_type")
        XCTAssertEqual(call("POST", "/sign-in", body: "token=sesame").code, "unsupported_media_type")
        XCTAssertEqual(call("POST", "/sign-in", query: [("token", "sesame")], headers: form, body: "token=sesame").code, "bad_request",
                       "the token never goes in a URL")
        XCTAssertEqual(call("GET", "/", query: [("page", "2")], headers: bearer).code, "bad_request")
        XCTAssertEqual(call("GET", "/", query: [("cursor", "soon")], headers: bearer).code, "bad_request")
    }

    func testFormDecoding() throws {
        func decode(_ s: String) throws -> String { try FormBody.decode(ArraySlice(s.utf8), what: "test") }
        XCTAssertEqual(try decode("a+b%20c%2Bd%26%3d"), "a b c+d&=")
        XCTAssertEqual(try decode("%C3%A9t%c3%a9"), "été")
        XCTAssertEqual(try decode(""), "")
    }

    func testWithoutATokenSignInGoesStraightToTheDashboard() throws {
        router = try makeRouter { _ in }
        XCTAssertEqual(call("GET", "/").status, 200)
        let answer = signIn("token=anything")
        XCTAssertEqual(answer.status, 303)
        XCTAssertNil(answer.header("set-cookie"))
        XCTAssertFalse(call("GET", "/").text.contains("sign-out"), "nothing to sign out of")
    }

    func testPagesOfStoresCountAndLinkToOlderOnes() throws {
        var ids: [String] = []
        for n in 1...5 {
            let (store, _) = try context.provisioner.createEmpty(label: "page-\(n)", ttlSeconds: nil)
            ids.append(store.id)
        }
        let first = try Dashboard.page(context, pageSize: 2)
        XCTAssertTrue(first.contains("stores 1–2 of 5"), first)
        XCTAssertTrue(first.contains(ids[4]) && first.contains(ids[3]) && !first.contains(ids[2]), "newest first")
        let cursor = try XCTUnwrap(context.registry.list(limit: 2).nextCursor)
        XCTAssertTrue(first.contains(#"<a rel="next" href="/?cursor=\#(cursor)">"#), first)

        let second = try Dashboard.page(context, cursor: cursor, pageSize: 2)
        XCTAssertTrue(second.contains("stores 3–4 of 5"), second)
        XCTAssertTrue(second.contains(ids[2]) && second.contains(ids[1]))
        let last = try Dashboard.page(context, cursor: try XCTUnwrap(context.registry.list(limit: 2, cursor: cursor).nextCursor), pageSize: 2)
        XCTAssertTrue(last.contains("stores 5–5 of 5"), last)
        XCTAssertFalse(last.contains(#"rel="next""#))
        XCTAssertTrue(last.contains(#"<a href="/">newest</a>"#))

        // Over HTTP the page size is 200, and the cursor is a query parameter.
        let page = call("GET", "/", query: [("cursor", cursor)], headers: bearer)
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.text.contains("stores 3–5 of 5"), page.text)
        XCTAssertTrue(call("GET", "/", headers: bearer).text.contains("stores 1–5 of 5"))
    }

    func testStoresShowSizesRowCountsAndADeleteButtonWithEverythingEscaped() throws {
        let label = #"<script>alert("x")</script>&'"#
        let (made, _) = try context.provisioner.createEmpty(label: label, ttlSeconds: nil)
        let answer = call("GET", "/", headers: bearer)
        XCTAssertEqual(answer.status, 200)
        XCTAssertFalse(answer.text.contains(label))
        XCTAssertTrue(answer.text.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"), answer.text)
        XCTAssertTrue(answer.text.contains(#"<button type="button" data-delete="\#(made.id)">delete</button>"#))
        XCTAssertTrue(answer.text.contains(#"<main id="live">"#))
        XCTAssertTrue(answer.text.contains(#"action="/sign-out""#))

        // Row counts as last read, per table in the title; never read: a dash.
        let store = try context.registry.get(made.id)
        store.remember(counts: [("artists", 4), ("<b>", 12)])
        let row = Dashboard.row(store).markup
        XCTAssertTrue(row.contains("<td class=\"num\" title=\"artists: 4\n&lt;b&gt;: 12\">16</td>"), row)
        XCTAssertTrue(row.contains(Dashboard.byteCount(store.sizeBytes)))
        let (unread, _) = try context.provisioner.createEmpty(label: nil, ttlSeconds: nil)
        if unread.lastCounts == nil { XCTAssertTrue(Dashboard.row(unread).markup.contains(">—</td>")) }
    }

    func testKeptStoresBuildsAndTheFilterShowWhatTheyAre() throws {
        // A build under way and a ready one, and a store copied from the ready one.
        guard case .build(let building) = try context.builds.claim(key: "app-v1", label: "<app>") else { return XCTFail("claims it") }
        do {
            let db = try Connection(path: try XCTUnwrap(building.path), mode: .readWrite)
            try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY); INSERT INTO notes DEFAULT VALUES")
        }
        _ = try context.builds.finish("app-v1")
        _ = try context.builds.claim(key: "app-v2", label: nil)
        let (store, _) = try context.provisioner.create(build: "app-v1", entry: try context.builds.entry("app-v1"), label: "run-9/a", ttlSeconds: nil)
        _ = try context.registry.update(store.id, StoreRegistry.Patch(keep: .yes))
        let (other, _) = try context.provisioner.createEmpty(label: "run-8/b", ttlSeconds: nil)

        let page = call("GET", "/", query: [("label_prefix", "run-9/")], headers: bearer).text
        XCTAssertTrue(page.contains(store.id) && !page.contains(other.id), page)
        XCTAssertTrue(page.contains("stores 1–1 of 1 matching"), page)
        XCTAssertTrue(page.contains(" · 2 live store(s) · "), "the header counts every store, the filter aside")
        XCTAssertTrue(page.contains(#"<tr class="kept">"#) && page.contains(#"<span class="badge">kept</span> run-9/a"#), page)
        XCTAssertTrue(page.contains("build <code>app-v1</code>"), page)
        XCTAssertTrue(page.contains(#"data-delete-prefix="run-9/" data-count="1">delete these 1 stores</button>"#), page)
        XCTAssertTrue(page.contains(#"<input name="label_prefix" value="run-9/""#), page)
        // The builds: the ready one with its rows, the one under way.
        XCTAssertTrue(page.contains("<h2>Builds</h2>"), page)
        XCTAssertTrue(page.contains("<td><code>app-v1</code></td><td>ready</td><td>&lt;app&gt;</td>"), page)
        XCTAssertTrue(page.contains("<td><code>app-v2</code></td><td>building</td>"), page)
        // A template filter alone offers no bulk delete (DELETE /stores takes a label or a prefix).
        let byTemplate = call("GET", "/", query: [("template", "gallery")], headers: bearer).text
        XCTAssertTrue(byTemplate.contains("no stores match"), byTemplate)
        XCTAssertFalse(byTemplate.contains(#"<button type="button" data-delete-prefix"#))
        XCTAssertTrue(byTemplate.contains("<option selected>gallery</option>"), byTemplate)
    }

    func testTheMigrationChecksAreAPage() throws {
        // A GET shows the last run and starts none (any web page can make a browser GET a URL).
        let before = call("GET", "/checks/page", headers: bearer)
        XCTAssertEqual(before.status, 200, before.text)
        XCTAssertTrue(before.text.contains("no check has run") && before.text.contains(#"<form method="post" action="/checks/page">"#), before.text)
        // Its button posts to the same path: the checks run, and the browser is sent back.
        let run = call("POST", "/checks/page", headers: bearer)
        XCTAssertEqual(run.status, 303, run.text)
        XCTAssertEqual(run.header("location"), "/checks/page")
        let page = call("GET", "/checks/page", headers: bearer)
        XCTAssertEqual(page.status, 200, page.text)
        XCTAssertEqual(page.header("content-type"), "text/html; charset=utf-8")
        XCTAssertNotNil(page.header("content-security-policy"))
        XCTAssertTrue(page.text.contains("<h2>gallery</h2>") && page.text.contains("<td class=\"pass\">passed</td>"), page.text)
        XCTAssertTrue(page.text.contains(" passed, 0 failed"), page.text)
        XCTAssertEqual(call("POST", "/checks/page", query: [("template", "nope")], headers: bearer).code, "unknown_template")
        // The dashboard links to it, and shows the run it made.
        let dashboard = call("GET", "/", headers: bearer).text
        XCTAssertTrue(dashboard.contains(#"<a href="/checks/page">run migration checks</a>"#))
        XCTAssertTrue(dashboard.contains("<h2>Last migration check</h2>"))
        // A browser without the token gets the sign-in form there too; an unknown template is the contract's 404.
        XCTAssertEqual(call("GET", "/checks/page", headers: ["accept": "text/html"]).status, 401)
        XCTAssertTrue(call("GET", "/checks/page", headers: ["accept": "text/html"]).text.contains("name=\"token\""))
        XCTAssertEqual(call("GET", "/checks/page", query: [("template", "nope")], headers: bearer).code, "unknown_template")
        let failing = Dashboard.checksPage([MigrationCheck.Report(template: "<t>", snapshot: "v1 <old>", fromVersion: "1", toVersion: "2",
                                                                  milliseconds: 3, failures: ["lost <data>"])])
        XCTAssertTrue(failing.contains("0 passed, 1 failed") && failing.contains("lost &lt;data&gt;") && failing.contains("v1 &lt;old&gt;"), failing)
        XCTAssertTrue(failing.contains("<h2>&lt;t&gt;</h2>"), failing)
    }

    func testByteCounts() {
        XCTAssertEqual(Dashboard.byteCount(0), "0 B")
        XCTAssertEqual(Dashboard.byteCount(1023), "1023 B")
        XCTAssertEqual(Dashboard.byteCount(1536), "1.5 KB")
        XCTAssertEqual(Dashboard.byteCount(200_704), "196 KB")
        XCTAssertEqual(Dashboard.byteCount(5 * 1024 * 1024 * 1024), "5.0 GB")
    }

    func testHTMLAnswersCarryAContentSecurityPolicy() throws {
        let answer = call("GET", "/", headers: bearer)
        let policy = try XCTUnwrap(answer.header("content-security-policy"))
        for directive in ["default-src 'none'", "connect-src 'self'", "form-action 'self'", "frame-ancestors 'none'"] {
            XCTAssertTrue(policy.contains(directive), policy)
        }
        // The page's own inline script and style are allowed by their hashes.
        XCTAssertTrue(answer.text.contains("<script>" + Dashboard.script + "</script>"))
        XCTAssertTrue(policy.contains("script-src " + Dashboard.hashSource(Dashboard.script)), policy)
        XCTAssertTrue(answer.text.contains("<style>" + Dashboard.style + "</style>"))
        XCTAssertTrue(policy.contains("style-src " + Dashboard.hashSource(Dashboard.style)), policy)
        XCTAssertEqual(answer.header("cache-control"), "no-store")
    }

    func testAStoresPageEscapesWhatTheTestWroteAndCutsLongValues() throws {
        var request = Provisioner.Request()
        request.template = "gallery"
        request.fixtures = ["artists"]
        let (store, _) = try context.provisioner.create(context.provisioner.plan(request), label: "<b>label</b>", ttlSeconds: nil)
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("""
            CREATE TABLE "<i>t</i>" (body TEXT, data BLOB);
            INSERT INTO "<i>t</i>" VALUES ('<img src=x onerror=alert(1)>', x'00ff'), (printf('%.*c', 100000, 'x'), NULL);
            UPDATE artists SET name = '<u>changed</u>' WHERE id = 1;
            """)
        let page = try Dashboard.storePage(context, store, table: nil, offset: 0)
        XCTAssertFalse(page.contains("<img"), "a value is text, never markup")
        XCTAssertFalse(page.contains("<i>t</i>"))
        XCTAssertFalse(page.contains("<b>label"))
        XCTAssertTrue(page.contains("&lt;img src=x onerror=alert(1)&gt;"))
        XCTAssertTrue(page.contains("<del>Hilma af Klint</del> → <ins>&lt;u&gt;changed&lt;/u&gt;</ins>"))
        XCTAssertTrue(page.contains("BLOB (2 bytes)"))
        XCTAssertTrue(page.contains("… (100000 bytes)"), "long text is cut")
        XCTAssertLessThan(page.utf8.count, 60_000, "and so is the page")
        XCTAssertThrowsError(try Dashboard.storePage(context, store, table: "nope", offset: 0))
        // Later rows of one table.
        try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 45) INSERT INTO artists (name) SELECT 'a' || i FROM n")
        let later = try Dashboard.storePage(context, store, table: "artists", offset: 40)
        XCTAssertTrue(later.contains("rows 41–49 of 49"), later)
    }
}
