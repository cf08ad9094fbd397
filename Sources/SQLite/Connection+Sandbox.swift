// SPDX-License-Identifier: Apache-2.0
import CSQLite
import Platform
import Synchronization

/// What a sandboxed connection may do. Untrusted SQL runs on a connection
/// with this policy applied: defensive mode, no trusted schema, no
/// extensions, an authorizer and a time limit.
public struct SandboxPolicy: Sendable {
    /// Pragmas that only read, allowed with or without an argument
    /// (`table_info(t)` takes a table name, not a new setting).
    public var readPragmas: Set<String> = [
        "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
        "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check", "collation_list",
        "function_list", "pragma_list", "module_list", "compile_options",
    ]
    /// Settings that may be read but never changed (`PRAGMA user_version` is
    /// fine, `PRAGMA user_version = 3` is refused).
    public var readOnlySettings: Set<String> = [
        "user_version", "schema_version", "application_id", "page_count", "page_size",
        "freelist_count", "data_version", "encoding", "journal_mode", "foreign_keys", "auto_vacuum",
        "max_page_count", "cache_size", "synchronous", "recursive_triggers", "busy_timeout",
    ]
    /// Functions that are never called.
    public var deniedFunctions: Set<String> = ["load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"]
    /// Largest string or blob a statement may make, in bytes.
    public var maxLength: Int32 = 64 * 1024 * 1024
    /// Longest single statement a client may send (`/query`; scripts have no such bound).
    public var maxSQLLength: Int32 = 1024 * 1024

    public init() {}
}

/// State the C callbacks read through their user-data pointer. Every
/// connection has one: the authorizer always notes transaction control (so
/// scripts can skip a `.dump`'s own BEGIN/COMMIT without reading text),
/// refuses denied functions on a hardened connection whoever's statement
/// reaches them (a view or trigger a client planted fires inside Larder's
/// own statements too), and refuses the rest of what the policy forbids
/// only while untrusted SQL runs.
final class Guard {
    var policy = SandboxPolicy()
    var hardened = false
    var enforcing = false
    var refusal: String?
    var sawTransactionControl = false
    var deadlineNanos: UInt64 = .max
    var timedOut = false
    /// Set by `interrupt()` (from another thread).
    let interrupted = Atomic<Bool>(false)

    /// How long a busy wait lasts, and when the present one began.
    var busyTimeoutNanos: UInt64 = 0
    var busySince: UInt64 = 0

    /// SQLite's busy handler: whether to try again (after a short sleep).
    /// Gives up when the busy timeout is spent, the time limit ran out, or
    /// the connection was interrupted.
    func keepWaiting(attempt: Int32) -> Bool {
        let now = monotonicNanos()
        if attempt == 0 { busySince = now }
        guard stopReason() == nil, now - busySince < busyTimeoutNanos else { return false }
        // As sqlite3_busy_timeout: short sleeps first, then 10 ms ones.
        usleep(attempt < 5 ? 1_000 : attempt < 20 ? 5_000 : 10_000)
        return true
    }

    /// Why a wait outside SQLite (a copy retrying a lock) must stop now, or nil.
    func stopReason() -> String? {
        if interrupted.load(ordering: .relaxed) { return "interrupted" }
        guard monotonicNanos() > deadlineNanos else { return nil }
        timedOut = true
        return "the time limit ran out"
    }

    func authorize(_ action: Int32, _ a: UnsafePointer<CChar>?, _ b: UnsafePointer<CChar>?) -> Int32 {
        if action == SQLITE_TRANSACTION { sawTransactionControl = true }
        if action == SQLITE_FUNCTION, hardened || enforcing, let b {
            let name = String(cString: b).lowercased()
            guard policy.deniedFunctions.contains(name) else { return SQLITE_OK }
            refusal = "the function \(name)()"
            return SQLITE_DENY
        }
        guard enforcing else { return SQLITE_OK }
        switch action {
        case SQLITE_ATTACH:
            refusal = "ATTACH (this also covers VACUUM INTO)"
        case SQLITE_DETACH:
            refusal = "DETACH"
        case SQLITE_TRANSACTION, SQLITE_SAVEPOINT:
            refusal = "transaction control (Larder runs the transaction)"
        case SQLITE_PRAGMA:
            let name = a.map { String(cString: $0).lowercased() } ?? ""
            if policy.readPragmas.contains(name) { return SQLITE_OK }
            if policy.readOnlySettings.contains(name) && b == nil { return SQLITE_OK }
            refusal = b.map { "PRAGMA \(name) = \(String(cString: $0))" } ?? "PRAGMA \(name)"
        default:
            return SQLITE_OK
        }
        return SQLITE_DENY
    }
}

/// One denied function's stand-in on a hardened connection: the name it
/// refuses, and the guard that notes the refusal.
private final class DeniedFunction {
    let name: String
    unowned let owner: Guard
    init(name: String, owner: Guard) { self.name = name; self.owner = owner }
}

/// Called instead of a denied function wherever SQLite evaluates it (a
/// CHECK constraint, an index expression or a generated column, which
/// SQLite resolves when it reads the schema, without asking the
/// authorizer): fails with SQLITE_AUTH and notes the refusal.
private let refuseDeniedFunction: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, _ in
    guard let context, let data = sqlite3_user_data(context) else { return }
    let denied = Unmanaged<DeniedFunction>.fromOpaque(data).takeUnretainedValue()
    denied.owner.refusal = "the function \(denied.name)()"
    sqlite3_result_error(context, "not authorized: \(denied.name)() reaches outside the database", -1)
    sqlite3_result_error_code(context, SQLITE_AUTH)
}

private let releaseDeniedFunction: @convention(c) (UnsafeMutableRawPointer?) -> Void = { data in
    guard let data else { return }
    Unmanaged<DeniedFunction>.fromOpaque(data).release()
}

let guardAuthorizer: @convention(c) (
    UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?
) -> Int32 = { context, action, a, b, _, _ in
    guard let context else { return SQLITE_DENY }
    return Unmanaged<Guard>.fromOpaque(context).takeUnretainedValue().authorize(action, a, b)
}

let guardBusy: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32 = { context, attempt in
    guard let context else { return 0 }
    return Unmanaged<Guard>.fromOpaque(context).takeUnretainedValue().keepWaiting(attempt: attempt) ? 1 : 0
}

private let guardProgress: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { context in
    guard let context else { return 1 }
    let state = Unmanaged<Guard>.fromOpaque(context).takeUnretainedValue()
    guard monotonicNanos() > state.deadlineNanos else { return 0 }
    state.timedOut = true
    return 1
}

/// Nanoseconds on the monotonic clock.
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

extension Connection {
    /// Makes the connection safe for a database whose contents a client
    /// controls (triggers and views it planted): defensive mode, no
    /// extensions, no FTS3 tokenizer pointers, no ATTACH, size limits, and
    /// the denied functions refused wherever the schema uses them. Larder's
    /// own statements still run; untrusted SQL goes through `untrusted`.
    ///
    /// The schema is trusted to call SQLite's built-in functions: Debian's
    /// SQLite 3.40 does not mark the JSON functions innocuous, so with
    /// `trusted_schema=0` a Django `JSONField` (`CHECK (JSON_VALID(...))`)
    /// or a `json_extract` index makes the whole database unreadable. What
    /// reaches outside the database is kept out by name instead, as SQLite
    /// reports it: the authorizer refuses `deniedFunctions` in views and
    /// triggers (resolved when the statement using them is prepared), and
    /// each denied name is replaced on this connection by a function that
    /// only refuses, for CHECK constraints, indexes and generated columns
    /// (resolved when SQLite reads the schema, where no authorizer is asked).
    /// Larder registers no functions of its own, so SQLite's built-ins are
    /// all there is to call.
    public func harden(_ policy: SandboxPolicy = SandboxPolicy()) throws {
        let settings: [(Int32, Int32)] = [
            (SQLITE_DBCONFIG_DEFENSIVE, 1),
            (SQLITE_DBCONFIG_TRUSTED_SCHEMA, 1),
            (SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0),
            (SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0),
            (SQLITE_DBCONFIG_ENABLE_TRIGGER, 1),
            (SQLITE_DBCONFIG_ENABLE_VIEW, 1),
        ]
        for (op, value) in settings {
            let rc = larder_sqlite3_db_config_int(handle, op, value)
            guard rc == SQLITE_OK else { throw SQLiteError(connection: handle, code: rc) }
        }
        sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, 0)
        sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, policy.maxLength)
        guardState.policy = policy
        guardState.hardened = true
        for name in policy.deniedFunctions {
            // Every arity SQLite or FTS3 registers them with, and any other.
            for arguments: Int32 in [-1, 0, 1, 2, 3] {
                let denied = Unmanaged.passRetained(DeniedFunction(name: name, owner: guardState)).toOpaque()
                let rc = sqlite3_create_function_v2(handle, name, arguments, SQLITE_UTF8, denied, refuseDeniedFunction, nil, nil, releaseDeniedFunction)
                guard rc == SQLITE_OK else { throw SQLiteError(connection: handle, code: rc) }
            }
        }
    }

    /// Runs `body`, which prepares and runs SQL a client sent, with the
    /// policy enforced: ATTACH, DETACH, transaction control, unsafe pragmas
    /// and denied functions fail to prepare (`sandboxRefusal` says which).
    /// Call `harden` first.
    public func untrusted<T>(_ body: () throws -> T) rethrows -> T {
        let was = guardState.enforcing
        guardState.enforcing = true
        guardState.refusal = nil
        defer { guardState.enforcing = was }
        return try body()
    }

    /// Runs `body` with a time limit: past it, the running statement is
    /// interrupted (SQLITE_INTERRUPT, and `timedOut` is true). Clears any
    /// earlier refusal first. Within another limit (one statement of a
    /// longer operation) the earlier of the two holds, and the outer one
    /// goes on afterwards as it was.
    public func withTimeLimit<T>(milliseconds: Int, _ body: () throws -> T) rethrows -> T {
        let state = guardState
        state.refusal = nil
        state.timedOut = false
        let outer = state.deadlineNanos
        state.deadlineNanos = min(outer, monotonicNanos() + UInt64(max(milliseconds, 1)) * 1_000_000)
        if outer == .max { sqlite3_progress_handler(handle, 1000, guardProgress, Unmanaged.passUnretained(state).toOpaque()) }
        defer {
            if outer == .max {
                sqlite3_progress_handler(handle, 0, nil, nil)
            } else if monotonicNanos() <= outer {
                state.timedOut = false // (only the inner limit ran out)
            }
            state.deadlineNanos = outer
        }
        return try body()
    }

    /// What the authorizer refused last, when a statement failed with SQLITE_AUTH.
    public var sandboxRefusal: String? { guardState.refusal }

    /// Whether the last time limit ran out (as opposed to an `interrupt()`).
    public var timedOut: Bool { guardState.timedOut }
}
