// SPDX-License-Identifier: Apache-2.0
import Foundation

/// One store on the server: its SQLite file at ``path`` and the calls that
/// read and change it. A value: copy it into tasks freely. ``info`` is the
/// store as it was when this value was made; ``refresh()`` reads it again.
public struct LarderStore: Sendable, Identifiable {
    /// The store as the server describes it (`GET /stores/{id}`).
    public struct Info: Codable, Sendable, Hashable {
        public var id: String
        /// The live SQLite file, for test code on the same machine to open with its own driver.
        public var path: String
        public var template: String?
        public var version: String?
        public var snapshot: String?
        public var fixtures: [String]?
        /// The key of the app-built template it is a copy of.
        public var build: String?
        public var label: String?
        /// Rows per user table (no `sqlite_*`, no migration bookkeeping).
        public var counts: [String: Int64]
        public var createdAt: Date
        /// When the server removes it: its ttl, or the server's
        /// `--kept-ttl-seconds` after it was kept; nil when kept forever.
        public var expiresAt: Date?
        /// A kept store (a failed test's) outlives its ttl.
        public var keep: Bool
        public var sizeBytes: Int64
        /// Absolute URLs: `self`, `artifact`, `database`, `counts`, `query`, ...
        public var links: [String: String]

        enum CodingKeys: String, CodingKey {
            case id, path, template, version, snapshot, fixtures, build, label, counts, keep, links
            case createdAt = "created_at", expiresAt = "expires_at", sizeBytes = "size_bytes"
        }
    }

    /// What a query answers: `rows[i][j]` is column `columns[j]` of row `i`
    /// (a BLOB is `{"base64": ...}`, see ``LarderValue/dataValue``).
    public struct QueryResult: Codable, Sendable, Hashable {
        public var columns: [String]
        public var rows: [[LarderValue]]
        /// Rows that a write changed.
        public var changes: Int64
        /// More rows than `max_rows` (or the server's limit) were left out.
        public var truncated: Bool?

        /// The rows as column name → value.
        public var records: [[String: LarderValue]] {
            rows.map { row in Dictionary(zip(columns, row), uniquingKeysWith: { first, _ in first }) }
        }
    }

    /// What loading fixtures answers: what was loaded and the counts after.
    public struct LoadResult: Codable, Sendable, Hashable {
        public var loaded: [String]
        public var counts: [String: Int64]
    }

    /// What a migration answers.
    public struct MigrateResult: Codable, Sendable, Hashable {
        public struct Applied: Codable, Sendable, Hashable {
            public var version: String
            public var name: String
            public var ms: Double
            public var direction: String?
        }
        public var from: String?
        public var to: String?
        public var applied: [Applied]
    }

    public let client: LarderClient
    public let info: Info
    public var id: String { info.id }
    /// The live SQLite file (``Info/path``).
    public var path: String { info.path }
    /// ``path`` as a file URL.
    public var fileURL: URL { URL(fileURLWithPath: info.path) }

    public init(client: LarderClient, info: Info) {
        self.client = client
        self.info = info
    }

    var base: String { "/stores/" + LarderClient.escapePath(id) }

    /// `GET /stores/{id}`: the store as it is now.
    public func refresh() async throws -> LarderStore {
        LarderStore(client: client, info: try await client.send("GET", base))
    }

    /// `GET /stores/{id}/counts`: rows per table, of every user table or of `tables`.
    public func counts(tables: [String]? = nil) async throws -> [String: Int64] {
        struct Counts: Decodable { var counts: [String: Int64] }
        let query = tables.map { [("tables", $0.joined(separator: ","))] } ?? []
        let answer: Counts = try await client.send("GET", base + "/counts", query: query)
        return answer.counts
    }

    /// Waits (a long poll) until the counts meet `condition`, e.g.
    /// `"artworks>=13"` or `"albums>=1,album_artworks>=3"` (operators
    /// `>= > = <= <`), and answers the counts then.
    ///
    /// - Throws: ``LarderTimeout`` (with the last counts) when it did not
    ///   hold within `timeout`; ``LarderError`` for anything else (an unknown
    ///   table, a bad condition).
    @discardableResult
    public func wait(_ condition: String, timeout: Duration = LarderClient.Defaults.waitTimeout, tables: [String]? = nil) async throws -> [String: Int64] {
        struct Counts: Decodable { var counts: [String: Int64] }
        var query = [("wait", condition), ("timeout_ms", String(timeout.wholeMilliseconds))]
        if let tables { query.append(("tables", tables.joined(separator: ","))) }
        let answer: Counts = try await client.send("GET", base + "/counts", query: query,
                                                   timeout: timeout + client.requestTimeout) { error in
            guard error.status == 408, error.code == "timeout" else { return error }
            var counts: [String: Int64] = [:]
            for (table, n) in error.details["counts"]?.objectValue ?? [:] { counts[table] = n.int64Value ?? 0 }
            return LarderTimeout(condition: condition, timeout: timeout, counts: counts, message: error.message, details: error.details)
        }
        return answer.counts
    }

    /// `POST /stores/{id}/query`: one SQL statement with `?` parameters,
    /// sandboxed to this store.
    ///
    ///     try await store.query("INSERT INTO artists (name, born) VALUES (?, ?)", parameters: ["Sonia Delaunay", 1885])
    @discardableResult
    public func query(_ sql: String, parameters: [LarderValue]? = nil, maxRows: Int? = nil) async throws -> QueryResult {
        try await runQuery(sql, parameters: parameters.map { .array($0) }, maxRows: maxRows)
    }

    /// `POST /stores/{id}/query` with named parameters (`:name`, `@name`, `$name`): `["name": "Hokusai"]`.
    @discardableResult
    public func query(_ sql: String, named parameters: [String: LarderValue], maxRows: Int? = nil) async throws -> QueryResult {
        try await runQuery(sql, parameters: .object(parameters), maxRows: maxRows)
    }

    private func runQuery(_ sql: String, parameters: LarderValue?, maxRows: Int?) async throws -> QueryResult {
        var body: [String: LarderValue] = ["sql": .string(sql)]
        if let parameters { body["params"] = parameters }
        if let maxRows { body["max_rows"] = .int(Int64(maxRows)) }
        return try await client.send("POST", base + "/query", body: .object(body))
    }

    /// `POST /stores/{id}/fixtures`: named fixtures of the template, rows
    /// (`["artists": [["id": 5, "name": "Sonia Delaunay"]]]`) or SQL. Give
    /// exactly one; all or nothing.
    @discardableResult
    public func load(fixtures: [String]? = nil, rows: [String: [[String: LarderValue]]]? = nil, sql: String? = nil) async throws -> LoadResult {
        var body: [String: LarderValue] = [:]
        if let fixtures { body["fixtures"] = .array(fixtures.map { .string($0) }) }
        if let rows { body["rows"] = .object(rows.mapValues { .array($0.map { .object($0) }) }) }
        if let sql { body["sql"] = .string(sql) }
        return try await client.send("POST", base + "/fixtures", body: .object(body))
    }

    /// `POST /stores/{id}/migrate`: to `"latest"` or a version (down too, where the format has downs).
    @discardableResult
    public func migrate(to version: String = "latest") async throws -> MigrateResult {
        try await client.send("POST", base + "/migrate", body: .object(["to": .string(version)]))
    }

    /// `POST /stores/{id}/reset`: the contents back to how the store was
    /// made, in place (same file: open connections stay valid).
    @discardableResult
    public func reset() async throws -> Info {
        try await client.send("POST", base + "/reset")
    }

    /// `GET /stores/{id}/diff`: what changed since the store was made
    /// (`base`, `schema`, `tables` with inserted/updated/deleted rows).
    public func diff(tables: [String]? = nil, limit: Int? = nil) async throws -> LarderValue {
        var query: [(String, String)] = []
        if let tables { query.append(("tables", tables.joined(separator: ","))) }
        if let limit { query.append(("limit", String(limit))) }
        return try await client.send("GET", base + "/diff", query: query)
    }

    /// `GET /stores/{id}/artifact`: the zip (`store.sqlite`, a consistent
    /// snapshot even while the app writes; `manifest.json`; `diff.json`; its
    /// creation state `base.sqlite`, so `larder open` shows what the test
    /// changed) saved to `file`, replacing it; folders are made as needed.
    public func artifact(to file: URL) async throws {
        try await client.download(base + "/artifact", query: [("base", "true")], to: file)
    }

    /// `GET /stores/{id}/database`: the consistent snapshot alone, as an SQLite file.
    public func database(to file: URL) async throws {
        try await client.download(base + "/database", to: file)
    }

    /// `PATCH /stores/{id} {"keep": true}`: it outlives its ttl, for the
    /// server's `--kept-ttl-seconds` (7 days by default); `forever: true`
    /// keeps it until it is deleted.
    @discardableResult
    public func keep(forever: Bool = false) async throws -> Info {
        try await client.send("PATCH", base, body: .object(["keep": forever ? .string("forever") : .bool(true)]))
    }

    /// `DELETE /stores/{id}`: every file of the store goes.
    public func delete() async throws {
        let _: LarderClient.Empty = try await client.send("DELETE", base)
    }
}
