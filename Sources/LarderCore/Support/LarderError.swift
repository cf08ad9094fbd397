// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

/// The one error type of Larder: a code from the contract, a message for
/// people and details for programs. The server maps `code` to a status.
public struct LarderError: Error, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable, CaseIterable {
        case badRequest = "bad_request"
        case unauthorized
        case forbiddenSQL = "forbidden_sql"
        case forbidden
        case notFound = "not_found"
        case storeNotFound = "store_not_found"
        case unknownTemplate = "unknown_template"
        case unknownFixture = "unknown_fixture"
        case unknownSnapshot = "unknown_snapshot"
        case unknownVersion = "unknown_version"
        case unknownBuild = "unknown_build"
        case methodNotAllowed = "method_not_allowed"
        case timeout
        case conflict
        case payloadTooLarge = "payload_too_large"
        case unsupportedMediaType = "unsupported_media_type"
        case migrationFailed = "migration_failed"
        case fixtureFailed = "fixture_failed"
        case sqlError = "sql_error"
        case quotaExceeded = "quota_exceeded"
        case insufficientStorage = "insufficient_storage"
        case internalError = "internal"
        case unavailable
    }

    public var code: Code
    public var message: String
    public var details: [(String, JSONValue)]
    /// The SQLite error behind this one, when there is one (not rendered).
    public var underlying: SQLiteError?

    public init(_ code: Code, _ message: String, details: [(String, JSONValue)] = []) {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// Longest string in an error body: a client's 2 MB statement is not echoed whole.
    public static let maxDetailBytes = 2048

    public var body: JSONValue {
        ["error": ["code": .string(code.rawValue), "message": .string(LarderError.cut(message)),
                   "details": .object(details.map { ($0.0, LarderError.cut($0.1)) })]]
    }

    static func cut(_ text: String) -> String {
        let bytes = text.utf8
        guard bytes.count > maxDetailBytes else { return text }
        var end = bytes.index(bytes.startIndex, offsetBy: maxDetailBytes)
        while end > bytes.startIndex && bytes[end] & 0xC0 == 0x80 { end = bytes.index(before: end) } // not inside a character
        return String(decoding: bytes[..<end], as: UTF8.self) + "… (\(bytes.count) bytes in all)"
    }

    static func cut(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let s): return .string(cut(s))
        case .array(let items): return .array(items.map(cut))
        case .object(let members): return .object(members.map { ($0.0, cut($0.1)) })
        default: return value
        }
    }

    public static func badRequest(_ message: String) -> LarderError { LarderError(.badRequest, message) }

    /// Why a request of a valid shape was refused for what it meets (the
    /// store, its template, another parameter, the SQL's text): `reason` in
    /// `details`, for programs, where the message is for people.
    public enum Reason: String, Sendable {
        /// The store was not made from a template: no migrations, no named fixtures.
        case noTemplate = "no_template"
        /// A migration on the way down has no down part.
        case noDownMigration = "no_down_migration"
        /// A table the store (or its base) does not have.
        case unknownTable = "unknown_table"
        /// A label longer than 256 bytes (a schema counts characters).
        case labelTooLong = "label_too_long"
        /// `timeout_ms` without the `wait` it goes with.
        case timeoutWithoutWait = "timeout_without_wait"
        /// `DELETE /stores` saying neither `label` nor `label_prefix`.
        case noSelector = "no_selector"
        /// An app's check of a store that was not uploaded (its base is not an old database).
        case notAnUpload = "not_an_upload"
        /// SQL that is not exactly one statement.
        case notOneStatement = "not_one_statement"
        /// `params` that do not fit the statement's parameters.
        case paramsMismatch = "params_mismatch"
        /// More fixture names than a store's record keeps (`StoreRecord.maxFixtures`).
        case tooManyFixtures = "too_many_fixtures"
        /// An uploaded or checked-in body that is not a (sound) SQLite database, or a zip without one.
        case notADatabase = "not_a_database"
    }

    /// A bad request with its `reason`.
    public static func badRequest(_ message: String, reason: Reason, details: [(String, JSONValue)] = []) -> LarderError {
        LarderError(.badRequest, message, details: details + [("reason", .string(reason.rawValue))])
    }

    /// SQLite's refusal of work named by `what`, as `code` (fixture_failed,
    /// sql_error, ...); whatever the work, a full disk is `insufficient_storage`
    /// and a lock held by another connection `conflict`.
    public static func sqlite(_ error: SQLiteError, as code: Code, _ message: String, details: [(String, JSONValue)] = []) -> LarderError {
        if error.isBusy { return busy(error) }
        var all = details
        if let statement = error.statement { all.append(("statement", .string(statement))) }
        all.append(("sqlite_code", .int(Int64(error.code))))
        all.append(("sqlite_message", .string(error.message)))
        let outOfSpace = error.isFull || error.isOutOfSpace
        var made = LarderError(outOfSpace ? .insufficientStorage : code,
                               outOfSpace ? "the file system is full: \(message): \(error.message)" : "\(message): \(error.message)", details: all)
        made.underlying = error
        return made
    }

    /// SQLite's temporary files of the work (a sort, a temporary table)
    /// would pass `--max-disk-bytes`: `quota_exceeded`.
    static func temporaryFilesOverQuota(_ error: SQLiteError) -> LarderError {
        var made = LarderError(.quotaExceeded, "the disk quota is reached: SQLite's temporary files for this work (a sort, a temporary table) "
                                   + "would pass it; nothing of it was kept. Delete stores, narrow the query, or raise --max-disk-bytes",
                               details: [("sqlite_code", .int(Int64(error.code)))])
        made.underlying = error
        return made
    }

    /// A lock another connection holds (a test's open write transaction)
    /// outlasted the busy wait: `conflict`, to be tried again.
    static func busy(_ error: SQLiteError) -> LarderError {
        var made = LarderError(.conflict, "the store is locked by another connection (a test's open write transaction?); try again once it commits",
                               details: [("sqlite_code", .int(Int64(error.code))), ("retry_after_seconds", .int(1))])
        made.underlying = error
        return made
    }

    /// A database file SQLite cannot read as one (a test wrote over its
    /// store's header or pages): `sql_error`, with what a test can do.
    static func damaged(_ error: SQLiteError) -> LarderError {
        let what = error.isUnreadable ? "cannot be read as it is" : "is damaged"
        var made = LarderError(.sqlError, "the database file \(what) (SQLite: \(error.message)); a test can write over its own store's "
                                   + "files: reset the store (it is made again from its base) or delete it",
                               details: [("sqlite_code", .int(Int64(error.code))), ("sqlite_message", .string(error.message))])
        made.underlying = error
        return made
    }

    /// The contract's error for a low-level failure that has one (a full
    /// disk, a busy store), or nil for a bug.
    public static func classify(_ error: Error) -> LarderError? {
        if let e = error as? LarderError { return e }
        if let e = error as? SQLiteError {
            if e.overTemporaryBudget { return temporaryFilesOverQuota(e) }
            if e.isFull || e.isOutOfSpace { return sqlite(e, as: .insufficientStorage, "no room for this work") }
            if e.isBusy { return busy(e) }
            if e.isDamage || e.isUnreadable { return damaged(e) }
        }
        if let e = error as? FileSystem.Failure, e.isOutOfSpace {
            return LarderError(.insufficientStorage, "the file system is full: \(e.description)")
        }
        return nil
    }
}
