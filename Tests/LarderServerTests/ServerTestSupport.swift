import Foundation
@testable import LarderCore
import MicroHTTP
@testable import LarderServer
import XCTest

/// What the tests of routes without sockets share: a server's root and
/// configuration, and a request through the router.

/// The repository's sample fixtures, found from this file.
let sampleFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    + "/fixtures"

/// A new root for a test's server under the temporary directory; the test removes it.
func scratchRoot(_ name: String) -> String { NSTemporaryDirectory() + "larder-\(name)-\(UUID().uuidString)" }

/// A server on `root` with the sample fixtures, logging only what is critical (tests read answers, not log lines).
func serverConfiguration(root: String) -> Configuration {
    var c = Configuration()
    c.root = root
    c.fixtures = sampleFixtures
    c.logLevel = "critical"
    return c
}

/// The router's answer to one request.
struct RouterAnswer {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: JSONValue? { try? JSONValue.parse(body) }
    /// The contract's error code.
    var code: String? { json?["error"]?["code"]?.stringValue }
    func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
}

extension Router {
    /// `method path` routed as the server routes it. A request that gets no
    /// answer fails the test (status -1), rather than reading as a status.
    func call(_ method: String, _ path: String, query: [(String, String)] = [], headers: [String: String] = [:], body: String = "",
              file: StaticString = #filePath, line: UInt = #line) -> RouterAnswer {
        let reply = route(Request(method: method, path: path, query: query.map { (name: $0.0, value: $0.1) }, headers: headers, body: Array(body.utf8)))
        guard let response = reply.answeredHere() else {
            XCTFail("\(method) \(path) got no answer", file: file, line: line)
            return RouterAnswer(status: -1, headers: [], body: [])
        }
        XCTAssertEqual(server.undeclared.withLock { $0 }, [:], "\(method) \(path): an answer the OpenAPI document does not declare", file: file, line: line)
        return RouterAnswer(status: response.status, headers: response.headers, body: response.bodyBytes ?? [])
    }
}

/// A test case that routes requests through its `router`.
protocol RouterTestCase: AnyObject {
    var router: Router! { get }
}

extension RouterTestCase {
    func call(_ method: String, _ path: String, query: [(String, String)] = [], headers: [String: String] = [:], body: String = "",
              file: StaticString = #filePath, line: UInt = #line) -> RouterAnswer {
        router.call(method, path, query: query, headers: headers, body: body, file: file, line: line)
    }
}
