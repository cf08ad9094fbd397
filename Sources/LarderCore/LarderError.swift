import SQLite

/// The one error type of Larder: a code from the contract, a message for
/// people and details for programs. The server maps `code` to a status.
public struct LarderError: Error, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable, CaseIterable {
        case badRequest = "bad_request"
        case unauthorized
        case forbiddenSQL = "forbidden_sql"
        case notFound = "not_found"
        case storeNotFound = "store_not_found"
        case unknownTemplate = "unknown_template"
        case unknownFixture = "unknown_fixture"
        case unknownSnapshot = "unknown_snapshot"
        case unknownVersion = "unknown_version"
        case methodNotAllowed = "method_not_allowed"
        case timeout
        case conflict
        case payloadTooLarge = "payload_too_large"
        case unsupportedMediaType = "unsupported_media_type"
        case migrationFailed = "migration_failed"
        case fixtureFailed = "fixture_failed"
        case sqlError = "sql_error"
        case quotaExceeded = "quota_exceeded"
        case internalError = "internal"
        case unavailable

        /// The HTTP status the contract gives this code.
        public var status: Int {
            switch self {
            case .badRequest: return 400
            case .unauthorized: return 401
            case .forbiddenSQL: return 403
            case .notFound, .storeNotFound, .unknownTemplate, .unknownFixture, .unknownSnapshot, .unknownVersion: return 404
            case .methodNotAllowed: return 405
            case .timeout: return 408
            case .conflict: return 409
            case .payloadTooLarge: return 413
            case .unsupportedMediaType: return 415
            case .migrationFailed, .fixtureFailed, .sqlError: return 422
            case .quotaExceeded: return 429
            case .internalError: return 500
            case .unavailable: return 503
            }
        }
    }

    public var code: Code
    public var message: String
    public var details: [(String, JSONValue)]

    public init(_ code: Code, _ message: String, details: [(String, JSONValue)] = []) {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public var body: JSONValue {
        ["error": ["code": .string(code.rawValue), "message": .string(message), "details": .object(details)]]
    }

    public static func badRequest(_ message: String) -> LarderError { LarderError(.badRequest, message) }

    /// SQLite's refusal of work named by `what`, as `code` (fixture_failed, sql_error, ...).
    public static func sqlite(_ error: SQLiteError, as code: Code, _ message: String, details: [(String, JSONValue)] = []) -> LarderError {
        var all = details
        if let statement = error.statement { all.append(("statement", .string(statement))) }
        all.append(("sqlite_code", .int(Int64(error.code))))
        all.append(("sqlite_message", .string(error.message)))
        return LarderError(code, "\(message): \(error.message)", details: all)
    }
}
