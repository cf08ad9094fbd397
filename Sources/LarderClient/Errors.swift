// SPDX-License-Identifier: Apache-2.0
import Foundation

/// An error answer of the server: `{"error": {"code", "message", "details"}}`
/// with its HTTP status. `code` is the contract's (`store_not_found`,
/// `unknown_template`, `sql_error`, `conflict`, ...); switch on it, not on
/// the message.
///
/// A wait that does not hold throws ``LarderTimeout`` instead; failures to
/// reach the server at all are the `URLError`s of Foundation, as they come.
///
/// The client's own refusals have status 0: `bad_mode` (a `LARDER_MODE`
/// that is neither `remote` nor `local`), `remote_mode` (a build that
/// needs the server's files), and in remote mode `no_local_copy`,
/// `local_copy`, `check_in_failed`; `download_failed` is a download whose
/// SHA-256 is not the one the server sent.
public struct LarderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status (404, 422, ...); 0 for the client's own refusals.
    public let status: Int
    /// The contract's code, e.g. `"unknown_template"`. An answer that is not
    /// the contract's error body (a proxy's HTML page) has `"unexpected_response"`.
    public let code: String
    public let message: String
    /// What the server adds: for `migration_failed`, the migration, statement
    /// and SQLite's message; for `sql_error` SQLite's code; and so on.
    public let details: [String: LarderValue]
    /// The answer's `X-Request-Id`, to find the server's log line.
    public let requestID: String?
    /// `Retry-After` in seconds, sent with 409 `conflict` (a test's own
    /// write transaction holds the store).
    public let retryAfter: Int?

    public init(status: Int, code: String, message: String, details: [String: LarderValue] = [:],
                requestID: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.requestID = requestID
        self.retryAfter = retryAfter
    }

    public var description: String {
        var text = status == 0 ? "Larder \(code): \(message)" : "Larder \(status) \(code): \(message)"
        if !details.isEmpty { text += " \(LarderValue.object(details))" }
        return text
    }
}

extension LarderError: LocalizedError {
    public var errorDescription: String? { description }
}

/// A count wait (``LarderStore/wait(_:timeout:)``) whose condition did not
/// hold in time (the server's 408 `timeout`). Its own type, so a test tells
/// "my app never wrote the rows" from every other failure; it carries the
/// counts as they were last read.
public struct LarderTimeout: Error, Sendable, Equatable, CustomStringConvertible {
    /// The condition as sent, e.g. `"artworks>=13"`.
    public let condition: String
    public let timeout: Duration
    /// Every table's count when the wait gave up (the tables asked for, when
    /// the wait named some).
    public let counts: [String: Int64]
    public let message: String
    /// The whole error body's details (`counts`, `wait`, `timeout_ms`).
    public let details: [String: LarderValue]

    public init(condition: String, timeout: Duration, counts: [String: Int64], message: String, details: [String: LarderValue] = [:]) {
        self.condition = condition
        self.timeout = timeout
        self.counts = counts
        self.message = message
        self.details = details
    }

    public var description: String {
        let shown = counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
        return "Larder wait '\(condition)' did not hold within \(timeout): counts \(shown)"
    }
}

extension LarderTimeout: LocalizedError {
    public var errorDescription: String? { description }
}
