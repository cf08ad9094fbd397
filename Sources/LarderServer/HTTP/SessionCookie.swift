// SPDX-License-Identifier: Apache-2.0
import Digest
import FoundationEssentials
import MicroHTTP
import Synchronization
import Text

/// How a browser proves it knows the token without sending it on every
/// request: `POST /sign-in` with the token sets this cookie, and the token
/// check takes it in place of the `Authorization` header.
///
/// The value is the hex SHA-256 of a secret made at start and the token, so
/// the cookie never carries the token, cannot be made without knowing both,
/// and stops working when the server restarts. `HttpOnly` keeps it from the
/// page's scripts, `SameSite=Strict` keeps other sites' pages from sending it
/// (and `Origins` refuses them anyway).
///
/// Browsers keep cookies per host, not per port, so two servers on one
/// machine would sign each other's browsers out: the name carries the port
/// the browser reaches this server on (`larder_session_8080`), set at start.
final class SessionCookie: Sendable {
    static let prefix = "larder_session"

    let value: String
    /// `Secure` only where the browser reaches the server over https.
    let secure: Bool
    private let named = Mutex(SessionCookie.prefix)

    init(token: String, publicURL: String?) {
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        value = SHA256.hex(secret + Array(token.utf8))
        secure = publicURL?.lowercased().hasPrefix("https://") == true
    }

    /// The cookie's name for the URL browsers reach this server at.
    static func name(forBase base: String) -> String {
        guard let url = URLComponents(string: base) else { return prefix }
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        return prefix + "_\(port)"
    }

    /// Names the cookie once the server knows its address.
    func bind(base: String) { named.withLock { $0 = SessionCookie.name(forBase: base) } }

    var name: String { named.withLock { $0 } }

    private var attributes: String { "; Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "") }

    /// The `Set-Cookie` value that signs a browser in.
    var setting: String { name + "=" + value + attributes }

    /// The `Set-Cookie` value that signs it out.
    var clearing: String { name + "=; Max-Age=0" + attributes }

    /// The values of this cookie in the request's `Cookie` header (a browser
    /// may send more than one of a name).
    func values(in request: Request) -> [String] {
        guard let header = request.header("cookie") else { return [] }
        let name = self.name
        return header.split(separator: ";").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, String(parts[0]).trimmingSpaces() == name else { return nil }
            return String(parts[1]).trimmingSpaces()
        }
    }

    /// Whether the request carries the cookie of this server run.
    func admits(_ request: Request) -> Bool {
        values(in: request).contains { constantTimeEqual($0, value) }
    }
}

/// Whether two strings are equal, in a time that does not depend on where
/// they first differ (for secrets).
func constantTimeEqual(_ given: String, _ expected: String) -> Bool {
    var difference = given.utf8.count ^ expected.utf8.count
    for (a, b) in zip(given.utf8, expected.utf8) { difference |= Int(a ^ b) }
    return difference == 0
}
