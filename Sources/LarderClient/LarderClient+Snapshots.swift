// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Snapshot checks for any migrator: the app migrates the old databases it
/// keeps (Core Data's lightweight migration, GRDB's `DatabaseMigrator`, ...),
/// Larder judges them (`POST /stores/{id}/check`).
extension LarderClient {
    /// What a migrated snapshot must match.
    public enum Reference: Sendable {
        /// A ready app-built template (``build(key:label:timeout:migrate:)``), made by the same migrator.
        case build(String)
        /// A fresh build of one of the server's templates at a version.
        case template(String, version: String = "latest")
        /// A live store, as it is now.
        case store(String)

        var json: LarderValue {
            switch self {
            case .build(let key): return ["build": .string(key)]
            case .template(let name, let version): return ["template": .string(name), "version": .string(version)]
            case .store(let id): return ["store": .string(id)]
            }
        }
    }

    /// One check's result, as the server answers it (`"kind": "app"`).
    public struct CheckResult: Decodable, Sendable {
        public var kind: String
        public var snapshot: String?
        public var fromVersion: String?
        public var toVersion: String?
        public var passed: Bool
        public var ms: Double
        /// Every failure, in words (`notes.tag held 2 non-NULL values; the migrated store has 0`).
        public var failures: [String]
        public var notes: [String]
        /// The store judged: kept when the check failed, so it can be downloaded.
        public var storeID: String?

        /// The snapshot and its versions, then each failure on a line of its own.
        public var report: String {
            let versions = "\(fromVersion ?? "?") → \(toVersion ?? "?")"
            var text = "\(snapshot ?? "snapshot") (\(versions)) " + (passed ? "passed" : "failed")
            if let storeID, !passed { text += " (store \(storeID) kept)" }
            return ([text] + failures.map { "  - " + $0 }).joined(separator: "\n")
        }

        public init(kind: String = "app", snapshot: String?, fromVersion: String? = nil, toVersion: String? = nil, passed: Bool,
                    ms: Double = 0, failures: [String], notes: [String] = [], storeID: String? = nil) {
            self.kind = kind
            self.snapshot = snapshot
            self.fromVersion = fromVersion
            self.toVersion = toVersion
            self.passed = passed
            self.ms = ms
            self.failures = failures
            self.notes = notes
            self.storeID = storeID
        }

        enum CodingKeys: String, CodingKey { case kind, snapshot, fromVersion = "from_version", toVersion = "to_version", passed, ms, failures, notes }
    }

    /// `POST /stores` with a SQLite file as the body: a store of that
    /// database as it is (no migration), whose base is the file. In remote
    /// mode the store is then downloaded into a local copy, as
    /// ``createStore(template:fixtures:version:snapshot:keepSnapshotVersion:label:build:from:ttlSeconds:buildTimeout:)`` does.
    public func uploadStore(file: URL, label: String? = nil, ttlSeconds: Int? = nil) async throws -> LarderStore {
        var query: [(String, String)] = []
        if let label { query.append(("label", label)) }
        if let ttlSeconds { query.append(("ttl_seconds", String(ttlSeconds))) }
        let mode = try resolvedMode()
        let info: LarderStore.Info = try await send("POST", "/stores", query: query, raw: try Data(contentsOf: file),
                                                    contentType: "application/vnd.sqlite3")
        return try await madeStore(info, mode: mode)
    }

    /// `POST /stores/{id}/check`: judges `store`, which the app's migrator
    /// migrated, against `reference`. A failed check is a result with
    /// `passed == false`, not an error; an unknown store or reference, or a
    /// store that was not uploaded, is a ``LarderError``.
    ///   - expect: the `.expect.json` shape (`before`, `assert`, `counts`, `drops`, ...).
    public func check(store id: String, against reference: Reference, snapshot: String? = nil, expect: LarderValue? = nil,
                      dataCheck: Bool = true) async throws -> CheckResult {
        var body: [String: LarderValue] = ["against": reference.json]
        if let snapshot { body["snapshot"] = .string(snapshot) }
        if let expect { body["expect"] = expect }
        if !dataCheck { body["data"] = false }
        var result: CheckResult = try await send("POST", "/stores/" + LarderClient.escapePath(id) + "/check", body: .object(body),
                                                 accepting: [422])
        result.storeID = id
        return result
    }

    /// Uploads the old database `file`, lets `migrate` migrate it at the
    /// store's path (the app's own migrator, on a connection it opens and
    /// closes), and judges it. `expect` defaults to `NAME.expect.json` beside
    /// `NAME.sqlite`. A migrator that throws is a failed result. A failed
    /// snapshot's store is kept (to download); a passed one is deleted.
    ///
    /// In remote mode (``isRemote``) `migrate` gets the path of the store's
    /// local copy: the app's migrator runs where the test runs (in the iOS
    /// Simulator, say, which cannot open the server's files), the copy is
    /// checked in (``LarderStore/checkIn()``) and then judged; the copy is
    /// removed at the end. What a migrator that threw left is checked in
    /// too, to look at in the kept store.
    public func checkSnapshot(_ file: URL, against reference: Reference, expect: LarderValue? = nil, label: String? = nil,
                              migrate: (String) async throws -> Void) async throws -> CheckResult {
        let name = file.lastPathComponent
        let expectations = try expect ?? LarderClient.expectations(beside: file)
        let store = try await uploadStore(file: file, label: label ?? "snapshot " + name)
        var result: CheckResult
        do {
            do {
                try await migrate(store.path)
            } catch let error as LarderError {
                _ = try? await store.checkIn()
                throw error
            } catch {
                _ = try? await store.checkIn() // remote mode: what the migrator left, to look at
                result = CheckResult(snapshot: name, passed: false, failures: ["the app's migrator threw: \(error)"], storeID: store.id)
                _ = try await store.keep()
                try? await store.close()
                return result
            }
            try await store.checkIn() // remote mode: the migrated copy goes back before it is judged
            result = try await check(store: store.id, against: reference, snapshot: name, expect: expectations)
        } catch {
            _ = try? await store.keep()
            try? await store.close()
            throw error
        }
        if result.passed { try await store.delete() } else { _ = try await store.keep() }
        try? await store.close()
        return result
    }

    /// ``checkSnapshot(_:against:expect:label:migrate:)`` for every `*.sqlite`
    /// file of `directory`, in name order.
    public func checkSnapshots(in directory: URL, against reference: Reference,
                               migrate: (String) async throws -> Void) async throws -> [CheckResult] {
        var results: [CheckResult] = []
        for file in try LarderClient.snapshotFiles(in: directory) {
            results.append(try await checkSnapshot(file, against: reference, migrate: migrate))
        }
        return results
    }

    /// The `*.sqlite` files of `directory`, in name order.
    public static func snapshotFiles(in directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sqlite" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    /// `NAME.expect.json` beside `NAME.sqlite`, parsed, or nil when there is none.
    static func expectations(beside file: URL) throws -> LarderValue? {
        let expect = file.deletingPathExtension().appendingPathExtension("expect.json")
        guard FileManager.default.fileExists(atPath: expect.path) else { return nil }
        return try JSONDecoder().decode(LarderValue.self, from: Data(contentsOf: expect))
    }
}
