// SPDX-License-Identifier: Apache-2.0
import LarderCore
import Logging
import MicroHTTP

/// The one place where the contract's error codes become HTTP statuses.
extension LarderError.Code {
    var status: Int {
        switch self {
        case .badRequest: return 400
        case .unauthorized: return 401
        case .forbiddenSQL, .forbidden: return 403
        case .notFound, .storeNotFound, .unknownTemplate, .unknownFixture, .unknownSnapshot, .unknownVersion, .unknownBuild: return 404
        case .methodNotAllowed: return 405
        case .timeout: return 408
        case .conflict: return 409
        case .payloadTooLarge: return 413
        case .unsupportedMediaType: return 415
        case .migrationFailed, .fixtureFailed, .sqlError: return 422
        case .quotaExceeded: return 429
        case .internalError: return 500
        case .unavailable: return 503
        case .insufficientStorage: return 507
        }
    }
}

extension LarderError {
    /// What the HTTP layer refused on its own, as a contract error.
    init(refusal: Refusal) {
        switch refusal {
        case .payloadTooLarge(let declared, let limit):
            self.init(.payloadTooLarge, declared.map { "the body is \($0) bytes; the limit is \(limit)" } ?? "the body is over the limit of \(limit) bytes",
                      details: [("limit_bytes", .int(Int64(limit)))])
        case .ambiguousLength(let why):
            self.init(.badRequest, why)
        case .bodyNotKept(let failure):
            self.init(failure.isOutOfSpace ? .insufficientStorage : .internalError,
                      failure.isOutOfSpace ? "the file system is full: \(failure)" : "cannot keep the request body: \(failure)")
        case .shuttingDown:
            self.init(.unavailable, "the server is shutting down")
        case .otherUser(let uid):
            self.init(.forbidden, uid.map { "this server serves only its own user's processes; this connection is user \($0)'s" }
                ?? "this server serves only its own user's processes, and cannot tell whose this connection is")
        }
    }
}

func errorResponse(_ error: LarderError) -> Response {
    var response = json(error.code.status, error.body)
    response.errorCode = error.code.rawValue
    if error.code == .unauthorized { response.addHeader("WWW-Authenticate", "Bearer") }
    if error.code == .conflict { response.addHeader("Retry-After", "1") }
    return response
}

/// Any error as a contract error: LarderErrors as they are, known failures
/// (a full disk, a busy store) as theirs, anything else a 500 whose message
/// names the request id (the log has the detail).
func larderError(_ error: Error, requestID: String, logger: Logger) -> LarderError {
    if let e = LarderError.classify(error) { return e }
    logger.error("internal error", metadata: ["request_id": .string(requestID), "error": .string("\(error)")])
    return LarderError(.internalError, "internal error (request id \(requestID)): \(error)",
                       details: [("request_id", .string(requestID))])
}
