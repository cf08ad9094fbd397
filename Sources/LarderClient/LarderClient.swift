// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A client of a Larder server: makes stores, finds them again by id.
///
///     let larder = LarderClient()   // LARDER_URL, LARDER_TOKEN
///     let store = try await larder.createStore(template: "gallery", fixtures: ["artists", "artworks"])
///     print(store.path, store.info.counts)   // open `path` with your app's own SQLite stack
///
/// Every method is `async` and throws ``LarderError`` for the server's error
/// answers. The client holds no mutable state: share one between tests and
/// tasks (``shared`` reads the environment once).
///
/// In remote mode (``Mode``: `LarderClient(mode: .remote)`, `LARDER_MODE=remote`,
/// or a server whose host is not a loopback address) a store's `path` is a
/// local copy of it, which ``LarderStore/checkIn()`` hands back: for tests
/// that cannot open the server's files, such as an app's tests in the iOS
/// Simulator. See ``LarderStore``.
public final class LarderClient: Sendable {
    /// The server, e.g. `http://127.0.0.1:7464`.
    public let url: URL
    /// Sent as `Authorization: Bearer <token>` when set.
    public let token: String?
    /// How long an ordinary call may go without an answer (a first build of
    /// a template runs its migrations). Waits add their own timeout to it.
    public let requestTimeout: Duration
    /// The mode as given to the initializer (``Mode/automatic`` unless one
    /// was named); ``resolvedMode()`` says which it is.
    public let mode: Mode
    /// The mode resolved when the client was made, or why it does not resolve.
    let resolved: Result<Mode, LarderError>
    let session: URLSession

    /// The default server: `LARDER_URL` (else `http://127.0.0.1:7464`) and `LARDER_TOKEN`.
    public static let defaultURL = URL(string: "http://127.0.0.1:7464")!

    /// A client made from the environment, for code that wants one for the whole process.
    public static let shared = LarderClient()

    /// - Parameters:
    ///   - url: the server; nil reads `LARDER_URL`, else `http://127.0.0.1:7464`.
    ///   - token: the bearer token; nil reads `LARDER_TOKEN` (empty means none).
    ///   - requestTimeout: the longest silence from the server on an ordinary call.
    ///   - mode: ``Mode/remote`` for tests that cannot open the server's files
    ///     (the iOS Simulator, a device, another machine), ``Mode/local`` for
    ///     tests beside the server; ``Mode/automatic`` reads `LARDER_MODE`,
    ///     else is remote when the server's host is not a loopback address.
    ///     It beats `LARDER_MODE`. See ``resolvedMode()``.
    public init(url: URL? = nil, token: String? = nil, requestTimeout: Duration = Defaults.requestTimeout, mode: Mode = .automatic) {
        let environment = ProcessInfo.processInfo.environment
        var base = url ?? environment["LARDER_URL"].flatMap { $0.isEmpty ? nil : URL(string: $0) } ?? LarderClient.defaultURL
        // Paths are appended as text: no trailing slash.
        while base.absoluteString.hasSuffix("/"), let trimmed = URL(string: String(base.absoluteString.dropLast())) { base = trimmed }
        self.url = base
        let given = token ?? environment["LARDER_TOKEN"]
        self.token = (given?.isEmpty ?? true) ? nil : given
        self.requestTimeout = requestTimeout
        self.mode = mode
        do {
            resolved = .success(try LarderClient.resolveMode(mode, url: base, environment: environment))
        } catch {
            resolved = .failure(error as? LarderError ?? LarderError(status: 0, code: "bad_mode", message: "\(error)"))
        }
        let configuration = URLSessionConfiguration.ephemeral
        // Each request sets its own (idle) timeout; these only must not be shorter.
        configuration.timeoutIntervalForRequest = 3600
        configuration.timeoutIntervalForResource = 7 * 86_400
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
    }

    deinit { session.finishTasksAndInvalidate() }

    // MARK: Stores

    /// `POST /stores`: a fresh store. Only the arguments given are sent.
    ///
    /// - Parameters:
    ///   - template: a folder of the server's fixtures directory (`"gallery"`).
    ///   - fixtures: data fixtures applied in order after migrating.
    ///   - version: migrate to this version (the server's default is `"latest"`).
    ///   - snapshot: start from `snapshots/NAME.sqlite` of the template.
    ///   - keepSnapshotVersion: send `"version": null`, which keeps `snapshot` as it was
    ///     saved instead of migrating it; not with `version`.
    ///   - label: shown in listings and the dashboard; ``LarderTestCase`` puts the test's name here.
    ///   - build: the key of an app-built template (`POST /builds`); not with `template` or `from`.
    ///   - from: the id of a live store to fork; not with `template` or `build`.
    ///   - ttlSeconds: how long the store lives unless kept.
    ///   - buildTimeout: how long the server waits while `build` is still building (its default: 30 s).
    ///
    /// In remote mode the store is then downloaded (`GET /stores/{id}/database`)
    /// into a fresh private folder, `larder-remote-XXXXXX/store.sqlite` in the
    /// temporary directory: the store's ``LarderStore/path``. When that fails
    /// the store is deleted again.
    public func createStore(template: String? = nil, fixtures: [String]? = nil, version: String? = nil, snapshot: String? = nil,
                            keepSnapshotVersion: Bool = false, label: String? = nil, build: String? = nil, from: String? = nil,
                            ttlSeconds: Int? = nil, buildTimeout: Duration? = nil) async throws -> LarderStore {
        var body: [String: LarderValue] = [:]
        if let template { body["template"] = .string(template) }
        if let fixtures { body["fixtures"] = .array(fixtures.map { .string($0) }) }
        if let version { body["version"] = .string(version) } else if keepSnapshotVersion { body["version"] = .null }
        if let snapshot { body["snapshot"] = .string(snapshot) }
        if let label { body["label"] = .string(label) }
        if let build { body["build"] = .string(build) }
        if let from { body["from"] = .string(from) }
        if let ttlSeconds { body["ttl_seconds"] = .int(Int64(ttlSeconds)) }
        if let buildTimeout { body["timeout_ms"] = .int(buildTimeout.wholeMilliseconds) }
        let mode = try resolvedMode()
        // A build still building is waited for on the server.
        let wait = build == nil ? nil : (buildTimeout ?? Defaults.waitTimeout) + requestTimeout
        let info: LarderStore.Info = try await send("POST", "/stores", body: .object(body), timeout: wait)
        return try await madeStore(info, mode: mode)
    }

    /// `GET /stores/{id}`: a store made earlier (by another process too).
    /// It has no local copy, even in remote mode: its ``LarderStore/path``
    /// is the server's file and ``LarderStore/isRemote`` is false.
    public func store(id: String) async throws -> LarderStore {
        let info: LarderStore.Info = try await send("GET", "/stores/" + LarderClient.escapePath(id))
        return LarderStore(client: self, info: info)
    }

    /// `GET /stores`, newest first; `label` and `template` narrow it.
    public func stores(label: String? = nil, template: String? = nil, limit: Int? = nil) async throws -> [LarderStore] {
        struct Page: Decodable { var stores: [LarderStore.Info] }
        var query: [(String, String)] = []
        if let label { query.append(("label", label)) }
        if let template { query.append(("template", template)) }
        if let limit { query.append(("limit", String(limit))) }
        let page: Page = try await send("GET", "/stores", query: query)
        return page.stores.map { LarderStore(client: self, info: $0) }
    }

    /// `DELETE /stores?label=` / `?label_prefix=`: a whole suite's stores, kept ones too. Answers how many went.
    @discardableResult
    public func deleteStores(label: String? = nil, labelPrefix: String? = nil) async throws -> Int {
        struct Deleted: Decodable { var deleted: Int }
        var query: [(String, String)] = []
        if let label { query.append(("label", label)) }
        if let labelPrefix { query.append(("label_prefix", labelPrefix)) }
        let answer: Deleted = try await send("DELETE", "/stores", query: query)
        return answer.deleted
    }

    /// `GET /health`.
    public func health() async throws -> [String: LarderValue] {
        try await send("GET", "/health")
    }

    // MARK: Transport

    struct Empty: Decodable {}

    /// One call: JSON out (when `body` is given) or `raw` bytes of
    /// `contentType`, JSON in, errors as ``LarderError``. `accepting`: error
    /// statuses whose body is the answer (a failed check's 422).
    func send<Answer: Decodable>(_ method: String, _ path: String, query: [(String, String)] = [], body: LarderValue? = nil,
                                 raw: Data? = nil, contentType: String? = nil, accepting: Set<Int> = [],
                                 timeout: Duration? = nil, onError: ((LarderError) -> any Error)? = nil) async throws -> Answer {
        var request = makeRequest(method, path, query: query, timeout: timeout)
        if let body {
            request.httpBody = try JSONEncoder().encode(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        } else if let raw {
            request.httpBody = raw
            request.setValue(contentType ?? "application/octet-stream", forHTTPHeaderField: "Content-Type")
        }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let (data, response) = try await session.data(for: request)
        let http = try LarderClient.httpResponse(response)
        guard (200..<300).contains(http.statusCode) || accepting.contains(http.statusCode) else {
            let error = LarderClient.error(status: http.statusCode, body: data, response: http)
            throw onError?(error) ?? error
        }
        if Answer.self == Empty.self || data.isEmpty, let empty = Empty() as? Answer { return empty }
        do {
            return try LarderClient.decoder.decode(Answer.self, from: data)
        } catch {
            throw LarderError(status: http.statusCode, code: "unexpected_response",
                              message: "could not read the answer to \(method) \(path): \(error)",
                              details: ["body": .string(String(decoding: data.prefix(2000), as: UTF8.self))],
                              requestID: http.value(forHTTPHeaderField: "X-Request-Id"))
        }
    }

    /// A download into `destination` (replaced if it exists).
    func download(_ path: String, query: [(String, String)] = [], to destination: URL) async throws {
        let request = makeRequest("GET", path, query: query, timeout: max(requestTimeout, Defaults.downloadTimeout))
        let (temporary, response) = try await session.download(for: request)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let http = try LarderClient.httpResponse(response)
        guard (200..<300).contains(http.statusCode) else {
            throw LarderClient.error(status: http.statusCode, body: (try? Data(contentsOf: temporary)) ?? Data(), response: http)
        }
        let files = FileManager.default
        try files.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        if files.fileExists(atPath: destination.path) { try files.removeItem(at: destination) }
        do {
            try files.moveItem(at: temporary, to: destination)
        } catch {
            // Another file system: copy instead.
            try files.copyItem(at: temporary, to: destination)
        }
    }

    func makeRequest(_ method: String, _ path: String, query: [(String, String)], timeout: Duration?) -> URLRequest {
        var text = url.absoluteString + path
        if !query.isEmpty {
            text += "?" + query.map { LarderClient.escapeQuery($0.0) + "=" + LarderClient.escapeQuery($0.1) }.joined(separator: "&")
        }
        var request = URLRequest(url: URL(string: text)!)
        request.httpMethod = method
        request.timeoutInterval = (timeout ?? requestTimeout).timeInterval
        if let token { request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization") }
        return request
    }

    static func httpResponse(_ response: URLResponse) throws -> HTTPURLResponse {
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return http
    }

    static func error(status: Int, body: Data, response: HTTPURLResponse) -> LarderError {
        struct Body: Decodable {
            struct Inner: Decodable { var code: String; var message: String?; var details: [String: LarderValue]? }
            var error: Inner
        }
        let requestID = response.value(forHTTPHeaderField: "X-Request-Id")
        let retryAfter = response.value(forHTTPHeaderField: "Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        if let parsed = try? decoder.decode(Body.self, from: body) {
            return LarderError(status: status, code: parsed.error.code, message: parsed.error.message ?? "",
                               details: parsed.error.details ?? [:], requestID: requestID, retryAfter: retryAfter)
        }
        let text = String(decoding: body.prefix(2000), as: UTF8.self)
        return LarderError(status: status, code: "unexpected_response",
                           message: "HTTP \(status)" + (text.isEmpty ? "" : ": \(text)"), requestID: requestID, retryAfter: retryAfter)
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return date }
            if let date = try? Date(text, strategy: Date.ISO8601FormatStyle()) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an RFC 3339 time: \(text)")
        }
        return decoder
    }

    /// Only unreserved characters stay as they are: `artworks>=13` is `artworks%3E%3D13`.
    static func escapeQuery(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    static func escapePath(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

extension Duration {
    /// Whole milliseconds, as the server's `timeout_ms` takes them (rounded up, so a tiny wait is not 0).
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return attoseconds % 1_000_000_000_000_000 > 0 ? millis + 1 : millis
    }

    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
