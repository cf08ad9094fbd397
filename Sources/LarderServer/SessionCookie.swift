import Digest
import MicroHTTP

/// How a browser proves it knows the token without sending it on every
/// request: `POST /sign-in` with the token sets this cookie, and the token
/// check takes it in place of the `Authorization` header.
///
/// The value is the hex SHA-256 of a secret made at start and the token, so
/// the cookie never carries the token, cannot be made without knowing both,
/// and stops working when the server restarts. `HttpOnly` keeps it from the
/// page's scripts, `SameSite=Strict` keeps other sites' pages from sending it
/// (and `Origins` refuses them anyway).
struct SessionCookie: Sendable {
    static let name = "larder_session"

    let value: String
    /// `Secure` only where the browser reaches the server over https.
    let secure: Bool

    init(token: String, publicURL: String?) {
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        value = SHA256.hex(secret + Array(token.utf8))
        secure = SessionCookie.isSecure(publicURL: publicURL)
    }

    static func isSecure(publicURL: String?) -> Bool { publicURL?.lowercased().hasPrefix("https://") == true }

    private static func attributes(secure: Bool) -> String { "; Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "") }

    /// The `Set-Cookie` value that signs a browser in.
    var setting: String { SessionCookie.name + "=" + value + SessionCookie.attributes(secure: secure) }

    /// The `Set-Cookie` value that signs it out.
    static func clearing(secure: Bool) -> String { name + "=; Max-Age=0" + attributes(secure: secure) }

    /// The values of this cookie in the request's `Cookie` header (a browser
    /// may send more than one of a name).
    static func values(in request: Request) -> [String] {
        guard let header = request.header("cookie") else { return [] }
        return header.split(separator: ";").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, String(parts[0]).trimmingSpaces() == name else { return nil }
            return String(parts[1]).trimmingSpaces()
        }
    }

    /// Whether the request carries the cookie of this server run.
    func admits(_ request: Request) -> Bool {
        SessionCookie.values(in: request).contains { constantTimeEqual($0, value) }
    }
}

/// Whether two strings are equal, in a time that does not depend on where
/// they first differ (for secrets).
func constantTimeEqual(_ given: String, _ expected: String) -> Bool {
    var difference = given.utf8.count ^ expected.utf8.count
    for (a, b) in zip(given.utf8, expected.utf8) { difference |= Int(a ^ b) }
    return difference == 0
}
