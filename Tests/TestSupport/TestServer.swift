import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LarderCore
import LarderServer
import XCTest

/// A real server on port 0 with a temporary root, and a real HTTP client.
public final class TestServer: @unchecked Sendable {
    public let root: String
    public let app: LarderApp
    public var base: String { app.baseURL }

    public init(configure: (inout Configuration) -> Void = { _ in }) throws {
        root = NSTemporaryDirectory() + "larder-e2e-\(UUID().uuidString)"
        var c = Configuration()
        c.root = root
        c.port = 0
        c.fixtures = sampleFixtures
        c.reapIntervalSeconds = 1
        c.logLevel = "critical" // tests read answers, not access lines
        configure(&c)
        app = try LarderApp(configuration: c)
        try app.start()
    }

    deinit {
        // Every answer of the test kept to the route's declared statuses.
        XCTAssertEqual(app.undeclaredAnswers, [:], "answers the OpenAPI document does not declare")
        app.stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    public struct Answer: Sendable {
        public var status: Int
        public var data: Data
        public var headers: [String: String]
        public var json: JSONValue? { try? JSONValue.parse(Array(data)) }
        public var code: String? { json?["error"]?["code"]?.stringValue }
    }

    public func request(_ method: String, _ path: String, json body: String? = nil, data: Data? = nil, type: String? = nil,
                        headers: [String: String] = [:]) async throws -> Answer {
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        request.timeoutInterval = 60
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue(type ?? "application/json", forHTTPHeaderField: "Content-Type")
        } else if let data {
            request.httpBody = data
            request.setValue(type ?? "application/octet-stream", forHTTPHeaderField: "Content-Type")
        }
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var h: [String: String] = [:]
        for (k, v) in http.allHeaderFields { h[String(describing: k).lowercased()] = String(describing: v) }
        return Answer(status: http.statusCode, data: data, headers: h)
    }
}

/// Runs `body` against a fresh server, which is stopped and whose root is removed afterwards.
public func withTestServer(configure: (inout Configuration) -> Void = { _ in }, _ body: (TestServer) async throws -> Void) async throws {
    let server = try TestServer(configure: configure)
    try await body(server)
}
