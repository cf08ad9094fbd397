import Foundation
import Glibc
import SQLite

/// Builds the database file of a new store: empty, from an upload, or (with a
/// catalog) from a template, snapshot and fixtures through the template cache.
public final class Provisioner: Sendable {
    let registry: StoreRegistry

    public init(registry: StoreRegistry) {
        self.registry = registry
    }

    /// What a client asks `POST /stores` for.
    public struct Request: Sendable {
        public var template: String?
        public var version: String? = "latest"
        public var snapshot: String?
        public var fixtures: [String] = []
        public var label: String?
        public var ttlSeconds: Int?
        public init() {}
    }

    /// An empty store in WAL mode.
    public func createEmpty(label: String?, ttlSeconds: Int?) throws -> (Store, Provenance) {
        try registry.create(label: label, ttlSeconds: ttlSeconds) { path in
            let db = try Connection(path: path, mode: .readWriteCreate)
            try db.execute("PRAGMA journal_mode=WAL")
            return Provenance(counts: [])
        }
    }

    /// A store from uploaded database bytes, checked to be a real SQLite
    /// database; anything else is a 400 and leaves nothing behind.
    public func createFromUpload(_ bytes: [UInt8], label: String?, ttlSeconds: Int?,
                                 prepare: ((Connection) throws -> Provenance)? = nil) throws -> (Store, Provenance) {
        guard bytes.count >= 100, bytes.starts(with: Array("SQLite format 3\0".utf8)) else {
            throw LarderError(.badRequest, "the upload is not a SQLite database (no 'SQLite format 3' header)",
                              details: [("bytes", .int(Int64(bytes.count)))])
        }
        return try registry.create(label: label, ttlSeconds: ttlSeconds) { path in
            try FileSystem.writeAtomically(bytes, to: path)
            do {
                try Connection.validate(path: path)
            } catch let error as SQLiteError {
                throw LarderError(.badRequest, "the upload is not a usable SQLite database: \(error.message)",
                                  details: [("sqlite_code", .int(Int64(error.code))), ("sqlite_message", .string(error.message))])
            }
            let db = try Connection(path: path, mode: .readWrite)
            try db.execute("PRAGMA journal_mode=WAL")
            return try prepare?(db) ?? Provenance()
        }
    }
}
