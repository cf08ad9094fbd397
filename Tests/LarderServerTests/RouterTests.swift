import Foundation
@testable import LarderCore
import MicroHTTP
import SQLite
@testable import LarderServer
import XCTest

/// Routes without sockets: a Request in, a Reply out.
final class RouterTests: XCTestCase {
    var root: String!
    var router: Router!

    override func setUpWithError() throws {
        root = scratchRoot("router")
        var c = serverConfiguration(root: root)
        c.token = "sesame"
        router = Router(server: try ServerContext(configuration: c))
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: root) }

    func call(_ method: String, _ path: String, query: [(String, String)] = [], body: String = "", type: String? = "application/json",
              token: String? = "sesame", file: StaticString = #filePath, line: UInt = #line) -> (Int, JSONValue?) {
        var headers: [String: String] = [:]
        if let type { headers["content-type"] = type }
        if let token { headers["authorization"] = "Bearer " + token }
        let answer = router.call(method, path, query: query, headers: headers, body: body, file: file, line: line)
        return (answer.status, answer.json)
    }

    func code(_ answer: (Int, JSONValue?)) -> String? { answer.1?["error"]?["code"]?.stringValue }

    func testErrorsComeWithTheContractsStatusAndCode() {
        XCTAssertEqual(call("GET", "/health", token: nil).0, 200, "health needs no token")
        XCTAssertEqual(code(call("GET", "/stores", token: nil)), "unauthorized")
        XCTAssertEqual(code(call("GET", "/stores", token: "wrong")), "unauthorized")
        XCTAssertEqual(code(call("GET", "/nope")), "not_found")
        XCTAssertEqual(call("PUT", "/stores").0, 405)
        XCTAssertEqual(code(call("PUT", "/stores")), "method_not_allowed")
        XCTAssertEqual(code(call("GET", "/stores/st_missing")), "store_not_found")
        XCTAssertEqual(code(call("POST", "/stores", body: "{")), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores", body: "[]")), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"colour": "red"}"#)), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"ttl_seconds": "soon"}"#)), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"template": "nope"}"#)), "unknown_template")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"template": "gallery", "fixtures": ["nope"]}"#)), "unknown_fixture")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"template": "gallery", "snapshot": "nope"}"#)), "unknown_snapshot")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"template": "gallery", "version": "77"}"#)), "unknown_version")
        XCTAssertEqual(code(call("POST", "/stores", body: "x", type: "text/csv")), "unsupported_media_type")
        XCTAssertEqual(code(call("GET", "/stores", query: [("limit", "0")])), "bad_request")
        XCTAssertEqual(code(call("GET", "/stores", query: [("colour", "red")])), "bad_request")
    }

    func testBadQueryValuesAndBodiesOnStoreRoutes() throws {
        let id = try XCTUnwrap(call("POST", "/stores", body: "{}").1?["id"]?.stringValue)
        XCTAssertEqual(code(call("GET", "/stores", query: [("cursor", "not-a-cursor")])), "bad_request")
        XCTAssertEqual(code(call("PATCH", "/stores/" + id, body: #"{"keep": "yes"}"#)), "bad_request")
        XCTAssertEqual(code(call("PATCH", "/stores/" + id, body: #"{"ttl_seconds": 0}"#)), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores/\(id)/query", body: #"{"params": [1]}"#)), "bad_request")
        XCTAssertEqual(code(call("GET", "/stores/\(id)/counts", query: [("wait", "t ~ 3")])), "bad_request")
        XCTAssertEqual(code(call("GET", "/stores/\(id)/counts", query: [("tables", "nope")])), "bad_request")
        XCTAssertEqual(code(call("GET", "/stores/\(id)/counts", query: [("timeout_ms", "10")])), "bad_request")
        XCTAssertEqual(code(call("GET", "/stores/\(id)/artifact", query: [("compression", "zstd")])), "bad_request")
        XCTAssertEqual(code(call("GET", "/checks/migrations", query: [("format", "tap")])), "bad_request")
        XCTAssertEqual(code(call("GET", "/checks/migrations", query: [("template", "nope")])), "unknown_template")
        XCTAssertEqual(code(call("GET", "/checks/migrations", query: [("round_trip", "maybe")])), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores/\(id)/fixtures", body: #"{"sql": "SELECT 1", "rows": {}}"#)), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"fixtures": ["artists"]}"#)), "bad_request")
        XCTAssertEqual(code(call("POST", "/stores", body: #"{"template": "gallery", "version": null}"#)), "bad_request")
    }

    func testCreateShowPatchDeleteWithoutSockets() throws {
        let (status, created) = call("POST", "/stores", body: #"{"label": "unit"}"#)
        XCTAssertEqual(status, 201)
        let id = try XCTUnwrap(created?["id"]?.stringValue)
        XCTAssertEqual(call("GET", "/stores/" + id).1?["label"], "unit")
        XCTAssertEqual(call("PATCH", "/stores/" + id, body: #"{"keep": true, "label": null}"#).1?["keep"], true)
        XCTAssertEqual(call("GET", "/stores/" + id).1?["label"], .null)
        XCTAssertEqual(call("DELETE", "/stores/" + id).0, 204)
        XCTAssertEqual(call("DELETE", "/stores/" + id).0, 404)
    }

    /// A long page is written on every core and put together: the same
    /// stores in the same order, newest first, as a short one, whatever the
    /// page size; and the body is what the JSON value would serialize to.
    func testALongListingIsTheSameListingWrittenInParts() throws {
        var ids: [String] = []
        for i in 0..<300 { ids.append(try XCTUnwrap(call("POST", "/stores", body: #"{"label": "n\#(i)"}"#).1?["id"]?.stringValue)) }
        let long = call("GET", "/stores", query: [("limit", "1000")])
        XCTAssertEqual(long.0, 200)
        XCTAssertEqual(long.1?["stores"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ids.reversed())
        XCTAssertEqual(long.1?["stores"]?.arrayValue?.last?["label"], "n0")
        XCTAssertEqual(long.1?["next_cursor"], .null)
        var walked: [String] = [], cursor: String?
        repeat {
            let page = call("GET", "/stores", query: [("limit", "257")] + (cursor.map { [("cursor", $0)] } ?? []))
            walked += page.1?["stores"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            cursor = page.1?["next_cursor"]?.stringValue
        } while cursor != nil
        XCTAssertEqual(walked, ids.reversed())
        let items: [JSONValue] = [["id": "a", "n": 1], ["id": "b\"\n", "n": .null]]
        for next in [nil, "12"] as [String?] {
            for stores in [[], items] {
                XCTAssertEqual(Array(StoreAnswer.listBody(serialized: stores.map { $0.serialized() }, next: next).joined()),
                               JSONValue.object([("stores", .array(stores)), ("next_cursor", JSONValue(next))]).serialized())
            }
        }
        // Parts that are runs of several stores, and empty ones (a core whose stores all went meanwhile).
        let three = items + [["id": "c"]]
        let run = Array(three.prefix(2).map { $0.serialized() }.joined(separator: [UInt8(ascii: ",")]))
        XCTAssertEqual(Array(StoreAnswer.listBody(serialized: [[], run, [], three[2].serialized()], next: nil).joined()),
                       JSONValue.object([("stores", .array(three)), ("next_cursor", .null)]).serialized())
    }

    /// The served document and the router agree both ways: every route and
    /// method is described, and nothing is described that does not exist.
    func testOpenAPIDescribesEveryRoute() throws {
        let (status, page) = call("GET", "/openapi.json")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(page?["openapi"], "3.1.0")
        var documented = Set<String>()
        for (path, item) in page?["paths"]?.objectMembers ?? [] {
            for (method, _) in item.objectMembers ?? [] { documented.insert(method.uppercased() + " " + path) }
        }
        let routed = Set(router.table.flatMap { route in route.methods.map { $0 + " " + route.name } })
        XCTAssertEqual(documented.subtracting(routed).sorted(), [], "described but not routed")
        XCTAssertEqual(routed.subtracting(documented).sorted(), [], "routed but not described")
        XCTAssertTrue(routed.contains("GET /stores/{id}/artifact"))

        // Every object the document names is among its components, and every component is named.
        let components = Set((page?["components"]?["schemas"]?.objectMembers ?? []).map(\.0))
        var named = Set<String>()
        func collect(_ value: JSONValue?) {
            if let ref = value?["$ref"]?.stringValue { named.insert(String(ref.dropFirst("#/components/schemas/".count))) }
            value?.objectMembers?.forEach { collect($0.1) }
            value?.arrayValue?.forEach { collect($0) }
        }
        collect(page)
        XCTAssertEqual(named.subtracting(components).sorted(), [], "named but not described")
        XCTAssertEqual(components.subtracting(named).sorted(), [], "described but never named")

        // The query names the router lets through are the ones described.
        for (path, item) in page?["paths"]?.objectMembers ?? [] {
            for (method, operation) in item.objectMembers ?? [] {
                let described = Set((operation["parameters"]?.arrayValue ?? []).filter { $0["in"]?.stringValue == "query" }.compactMap { $0["name"]?.stringValue })
                var allowed = router.queryNames[method.uppercased() + " " + path]
                // A raw upload's query (its template, version, label and ttl) is in the
                // operation's description: OpenAPI cannot tie parameters to a body's type.
                if method == "post" && path == "/stores" { allowed?.subtract(["template", "version", "label", "ttl_seconds"]) }
                XCTAssertEqual(allowed, described, "\(method) \(path)")
            }
        }
    }

    /// Every route refuses query names it does not know, before its handler runs.
    func testEveryRouteRefusesUnknownQueryNames() {
        for (route, methods) in router.table {
            let path = route.replacingOccurrences(of: "{id}", with: "st_nope").replacingOccurrences(of: "{key}", with: "k")
                .replacingOccurrences(of: "{name}", with: "gallery")
            for method in methods {
                let answer = call(method, path, query: [("surprise", "1")])
                XCTAssertEqual(answer.0, 400, "\(method) \(route)")
                XCTAssertEqual(answer.1?["error"]?["details"]?["parameter"]?.stringValue, "surprise", "\(method) \(route)")
            }
        }
    }

    /// Each answer object's encoding keeps to the schema beside it: no member
    /// the schema does not name, none it requires left out.
    func testAnswersKeepToTheirSchemas() throws {
        func check(_ answer: JSONValue?, _ schema: JSONValue, _ what: String) {
            let members = Set((answer?.objectMembers ?? []).map(\.0))
            let named = Set((schema["properties"]?.objectMembers ?? []).map(\.0))
            let required = Set((schema["required"]?.arrayValue ?? []).compactMap(\.stringValue))
            XCTAssertFalse(members.isEmpty, what)
            XCTAssertEqual(members.subtracting(named), [], "\(what): not in the schema")
            XCTAssertEqual(required.subtracting(members), [], "\(what): required but missing")
        }
        let created = call("POST", "/stores", body: #"{"template": "gallery"}"#)
        XCTAssertEqual(created.0, 201)
        check(created.1, StoreAnswer.schema, "a store")
        let claimed = call("POST", "/builds", body: #"{"key": "answers"}"#)
        XCTAssertEqual(claimed.0, 201)
        check(claimed.1, BuildAnswer.schema, "a build under way")
        let path = try XCTUnwrap(claimed.1?["path"]?.stringValue)
        try Connection(path: path, mode: .readWrite).execute("CREATE TABLE t (x)")
        let finished = call("POST", "/builds/answers/finish")
        XCTAssertEqual(finished.0, 200)
        check(finished.1, BuildAnswer.schema, "a ready build")
        for name in ["gallery", "boardgames"] {
            let template = call("GET", "/templates/" + name)
            XCTAssertEqual(template.0, 200, name)
            check(template.1, TemplateAnswer.schema, "template " + name)
        }
        for summary in call("GET", "/templates").1?["templates"]?.arrayValue ?? [] {
            check(summary, TemplateAnswer.summarySchema, "a template's summary")
        }

        // Every other JSON answer against the object its route table entry names.
        let table = Routes.table(Configuration())
        let id = try XCTUnwrap(created.1?["id"]?.stringValue)
        for (method, route, path, body) in [
            ("GET", "/health", "/health", ""), ("GET", "/templates/{name}", "/templates/gallery", ""),
            ("GET", "/stores", "/stores", ""), ("POST", "/stores/{id}/fixtures", "/stores/\(id)/fixtures", #"{"fixtures": ["artists"]}"#),
            ("GET", "/stores/{id}/counts", "/stores/\(id)/counts", ""), ("GET", "/stores/{id}/schema", "/stores/\(id)/schema", ""),
            ("GET", "/stores/{id}/diff", "/stores/\(id)/diff", ""), ("POST", "/stores/{id}/query", "/stores/\(id)/query", #"{"sql": "SELECT 1 AS one"}"#),
            ("GET", "/stores/{id}/migrations", "/stores/\(id)/migrations", ""), ("POST", "/stores/{id}/migrate", "/stores/\(id)/migrate", "{}"),
            ("GET", "/builds", "/builds", ""), ("GET", "/checks/migrations", "/checks/migrations", ""),
            ("DELETE", "/stores", "/stores?label=none", ""),
        ] {
            let op = try XCTUnwrap(table.first { $0.method == method && $0.path == route }, "\(method) \(route)")
            let object = try XCTUnwrap(op.answer, "\(method) \(route) names no answer")
            let parts = path.split(separator: "?", maxSplits: 1)
            let query: [(String, String)] = parts.count > 1 ? parts[1].split(separator: "&").map { pair in
                let kv = pair.split(separator: "=", maxSplits: 1); return (String(kv[0]), String(kv[1])) } : []
            let answer = call(method, String(parts[0]), query: query, body: body)
            XCTAssertTrue([200, 422].contains(answer.0), "\(method) \(path): \(answer.0)")
            check(answer.1, object.schema(Configuration()), "\(method) \(route)")
        }
    }

    /// A 400 that depends on state rather than on the request's shape says
    /// why in `details.reason`, for programs (the schemathesis checks read it).
    func testStateDependentRefusalsNameTheirReason() {
        func reason(_ answer: (Int, JSONValue?)) -> String? {
            XCTAssertEqual(answer.0, 400)
            return answer.1?["error"]?["details"]?["reason"]?.stringValue
        }
        XCTAssertEqual(reason(call("DELETE", "/stores")), "no_selector")
        XCTAssertEqual(reason(call("POST", "/stores", body: #"{"label": "\#(String(repeating: "é", count: 200))"}"#)), "label_too_long")
        let empty = call("POST", "/stores", body: "{}").1?["id"]?.stringValue ?? ""
        XCTAssertEqual(reason(call("GET", "/stores/\(empty)/counts", query: [("timeout_ms", "5")])), "timeout_without_wait")
        XCTAssertEqual(reason(call("GET", "/stores/\(empty)/counts", query: [("tables", "nope")])), "unknown_table")
        XCTAssertEqual(reason(call("GET", "/stores/\(empty)/migrations")), "no_template")
        XCTAssertEqual(reason(call("POST", "/stores/\(empty)/query", body: #"{"sql": "SELECT 1; SELECT 2"}"#)), "not_one_statement")
        XCTAssertEqual(reason(call("POST", "/stores/\(empty)/query", body: #"{"sql": "SELECT ?", "params": []}"#)), "params_mismatch")
        XCTAssertNil(reason(call("POST", "/stores/\(empty)/query", body: #"{"sql": "SELECT 1\u0000"}"#)), "a NUL is the request's shape")
    }
}
