import CSQLite
import Glibc

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
    public var maxSQLLength: Int32 = 1024 * 1024

    public init() {}
}

/// State the C callbacks read through their user-data pointer.
final class SandboxState {
    let policy: SandboxPolicy
    var refusal: String?
    var deadlineNanos: UInt64 = .max

    init(policy: SandboxPolicy) { self.policy = policy }

    func authorize(_ action: Int32, _ a: String?, _ b: String?) -> Int32 {
        switch action {
        case SQLITE_ATTACH:
            refusal = "ATTACH (this also covers VACUUM INTO)"
        case SQLITE_DETACH:
            refusal = "DETACH"
        case SQLITE_TRANSACTION, SQLITE_SAVEPOINT:
            refusal = "transaction control (each query runs on its own)"
        case SQLITE_FUNCTION:
            guard let name = b?.lowercased(), policy.deniedFunctions.contains(name) else { return SQLITE_OK }
            refusal = "the function \(name)()"
        case SQLITE_PRAGMA:
            let name = (a ?? "").lowercased()
            if policy.readPragmas.contains(name) { return SQLITE_OK }
            if policy.readOnlySettings.contains(name) && b == nil { return SQLITE_OK }
            refusal = b == nil ? "PRAGMA \(name)" : "PRAGMA \(name) = \(b!)"
        default:
            return SQLITE_OK
        }
        return SQLITE_DENY
    }
}

private let sandboxAuthorizer: @convention(c) (
    UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?
) -> Int32 = { context, action, a, b, _, _ in
    guard let context else { return SQLITE_DENY }
    let state = Unmanaged<SandboxState>.fromOpaque(context).takeUnretainedValue()
    return state.authorize(action, a.map { String(cString: $0) }, b.map { String(cString: $0) })
}

private let sandboxProgress: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { context in
    guard let context else { return 1 }
    let state = Unmanaged<SandboxState>.fromOpaque(context).takeUnretainedValue()
    return monotonicNanos() > state.deadlineNanos ? 1 : 0
}

/// Nanoseconds on the monotonic clock.
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

extension Connection {
    /// Locks this connection down for untrusted SQL. Call once, right after opening.
    public func applySandbox(_ policy: SandboxPolicy = SandboxPolicy()) throws {
        let settings: [(Int32, Int32)] = [
            (SQLITE_DBCONFIG_DEFENSIVE, 1),
            (SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0),
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
        sqlite3_limit(handle, SQLITE_LIMIT_SQL_LENGTH, policy.maxSQLLength)
        let state = SandboxState(policy: policy)
        sandbox = state
        let context = Unmanaged.passUnretained(state).toOpaque()
        sqlite3_set_authorizer(handle, sandboxAuthorizer, context)
        sqlite3_progress_handler(handle, 1000, sandboxProgress, context)
    }

    /// Runs `body` with a time limit: past it, the running statement is
    /// interrupted (SQLITE_INTERRUPT). Clears any earlier refusal first.
    public func withTimeLimit<T>(milliseconds: Int, _ body: () throws -> T) rethrows -> T {
        sandbox?.refusal = nil
        sandbox?.deadlineNanos = monotonicNanos() + UInt64(max(milliseconds, 1)) * 1_000_000
        defer { sandbox?.deadlineNanos = .max }
        return try body()
    }

    /// What the authorizer refused last, when a statement failed with SQLITE_AUTH.
    public var sandboxRefusal: String? { sandbox?.refusal }
}
