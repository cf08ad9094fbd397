// SPDX-License-Identifier: Apache-2.0
import Foundation

/// One store on the server: its SQLite file at ``path`` and the calls that
/// read and change it. A value: copy it into tasks freely. ``info`` is the
/// store as it was when this value was made; ``refresh()`` reads it again.
///
/// **Remote mode** (``isRemote``; see ``LarderClient/Mode``): for tests that
/// cannot open the server's files, as an app's tests in the iOS Simulator
/// cannot, ``path`` is a local copy of the store
/// (`larder-remote-XXXXXX/store.sqlite` in the temporary directory), the
/// test's working copy, and ``Info/path`` the server's file, of no use here.
/// ``checkIn()`` hands the copy back. The calls that change the store on
/// the server keep the copy the working copy: ``load(fixtures:rows:sql:)``,
/// ``migrate(to:)`` and ``query(_:parameters:maxRows:)`` first check the
/// copy in when its files changed since it was last checked out or in
/// (their size or modification time, the `-wal`'s included); then `load`,
/// `migrate` (when a migration ran), ``reset()`` and a query that changed
/// rows download the store over the copy. The calls that read the server's
/// store (``counts(tables:)``, ``wait(_:timeout:tables:)``,
/// ``diff(tables:limit:)``, ``artifact(to:)``, ``database(to:)``, a fork
/// with `from:`) see what was last checked in, not the copy's later
/// writes: call ``checkIn()`` first. Close your own connections to ``path``
/// before ``checkIn()`` and before a call that downloads over it. Each
/// check-in and download moves the whole database: a few milliseconds for a
/// test's store, more for a big one. ``delete()`` and ``close()`` remove
/// the copy's folder.
public struct LarderStore: Sendable, Identifiable {
    /// The store as the server describes it (`GET /stores/{id}`).
    public struct Info: Codable, Sendable, Hashable {
        public var id: String
        /// The live SQLite file, for test code on the same machine to open
        /// with its own driver: the server's path. In remote mode the test
        /// cannot open it; ``LarderStore/path`` is the local copy.
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
    /// The store as the server described it when this value was made (in
    /// remote mode its ``Info/path`` is the server's file).
    public let info: Info
    /// The local copy, in remote mode.
    let copy: LocalCopy?
    public var id: String { info.id }
    /// The SQLite file to open with your own driver: the live file
    /// (``Info/path``), or in remote mode the local copy.
    public var path: String { copy?.file.path ?? info.path }
    /// ``path`` as a file URL.
    public var fileURL: URL { copy?.file ?? URL(fileURLWithPath: info.path) }

    /// A store of the server's, with no local copy (``isRemote`` false).
    public init(client: LarderClient, info: Info) {
        self.init(client: client, info: info, copy: nil)
    }

    init(client: LarderClient, info: Info, copy: LocalCopy?) {
        self.client = client
        self.info = info
        self.copy = copy
    }

    var base: String { "/stores/" + LarderClient.escapePath(id) }

    /// `GET /stores/{id}`: the store as it is now (in remote mode, as last
    /// checked in; with the same local copy).
    public func refresh() async throws -> LarderStore {
        LarderStore(client: client, info: try await client.send("GET", base), copy: copy)
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
    ///
    /// In remote mode a local copy that changed is checked in first, and a
    /// statement that changed rows (`changes` > 0) has the store downloaded
    /// over the copy after; a schema change alone (`changes` 0) does not.
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
        return try await serverChange({ try await client.send("POST", base + "/query", body: .object(body)) },
                                      refresh: { (answer: QueryResult) in answer.changes > 0 })
    }

    /// `POST /stores/{id}/fixtures`: named fixtures of the template, rows
    /// (`["artists": [["id": 5, "name": "Sonia Delaunay"]]]`) or SQL. Give
    /// exactly one; all or nothing. In remote mode a local copy that changed
    /// is checked in first, and the store downloaded over the copy after.
    @discardableResult
    public func load(fixtures: [String]? = nil, rows: [String: [[String: LarderValue]]]? = nil, sql: String? = nil) async throws -> LoadResult {
        var body: [String: LarderValue] = [:]
        if let fixtures { body["fixtures"] = .array(fixtures.map { .string($0) }) }
        if let rows { body["rows"] = .object(rows.mapValues { .array($0.map { .object($0) }) }) }
        if let sql { body["sql"] = .string(sql) }
        return try await serverChange { try await client.send("POST", base + "/fixtures", body: .object(body)) }
    }

    /// `POST /stores/{id}/migrate`: to `"latest"` or a version (down too, where the format has downs).
    /// In remote mode a local copy that changed is checked in first, and the
    /// store downloaded over the copy after when a migration ran.
    @discardableResult
    public func migrate(to version: String = "latest") async throws -> MigrateResult {
        try await serverChange({ try await client.send("POST", base + "/migrate", body: .object(["to": .string(version)])) },
                               refresh: { (answer: MigrateResult) in !answer.applied.isEmpty })
    }

    /// `POST /stores/{id}/reset`: the contents back to how the store was
    /// made, in place (same file: open connections stay valid). In remote
    /// mode the store is then downloaded over the local copy, whose changes
    /// are dropped (never checked in); close your connections to the copy
    /// first (they would go on reading the old file).
    @discardableResult
    public func reset() async throws -> Info {
        try await serverChange(checkInFirst: false) { try await client.send("POST", base + "/reset") }
    }

    /// `GET /stores/{id}/diff`: what changed since the store was made
    /// (`base`, `schema`, `tables` with inserted/updated/deleted rows); in
    /// remote mode, up to the last check-in.
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
    /// In remote mode it holds the store as last checked in.
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

    /// `DELETE /stores/{id}`: every file of the store goes; in remote mode
    /// the local copy's folder too (as ``close()``), whatever the server
    /// answers, with no check-in.
    public func delete() async throws {
        do {
            let _: LarderClient.Empty = try await client.send("DELETE", base)
        } catch {
            try? await close()
            throw error
        }
        try await close()
    }
}
