import LarderCore
import MicroHTTP

let jsonType = "application/json; charset=utf-8"

func json(_ status: Int, _ value: JSONValue) -> Response {
    Response(status: status, contentType: jsonType, bytes: value.serialized())
}

func errorResponse(_ error: LarderError) -> Response {
    var response = json(error.code.status, error.body)
    if error.code == .unauthorized { response.addHeader("WWW-Authenticate", "Bearer") }
    return response
}

/// Any error as a contract error: LarderErrors as they are, anything else is
/// a 500 whose message names the request id (the log has the detail).
func larderError(_ error: Error, requestID: String) -> LarderError {
    if let e = LarderError.classify(error) { return e }
    logLine("request \(requestID) failed: \(error)")
    return LarderError(.internalError, "internal error (request id \(requestID)): \(error)",
                       details: [("request_id", .string(requestID))])
}

func logLine(_ text: String) {
    let line = Array(("[larder] " + text + "\n").utf8)
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}

#if canImport(Glibc)
import Glibc
#endif
