// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `POST /sign-in` and `POST /sign-out`: how a browser gets to the
/// dashboard of a server with a token. Both answer without the token.
enum SignInRoutes {
    /// The longest token the form takes (in characters).
    static let maxTokenLength = 1024

    /// A form with `token`: the right one sets the session cookie and goes
    /// to `/`; a wrong one shows the form again (401). Without a token
    /// configured there is nothing to sign in to: straight to `/`.
    static func signIn(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let form = try FormBody(request, RequestBody.signIn)
        guard let given = form.value("token") else {
            throw LarderError(.badRequest, "the form needs the field 'token'", details: [("field", "token")])
        }
        guard !given.isEmpty, given.unicodeScalars.count <= maxTokenLength else {
            throw LarderError(.badRequest, "field 'token' must be 1 to \(maxTokenLength) characters", details: [("field", "token")])
        }
        guard let token = s.configuration.token, let session = s.session else { return .now(seeOther()) }
        guard constantTimeEqual(given, token) else {
            s.logger.warning("sign-in with a wrong token")
            return .now(Dashboard.signInPage(s, request: request, message: "That is not this server's token."))
        }
        var response = seeOther()
        response.addHeader("Set-Cookie", session.setting)
        return .now(response)
    }

    /// Clears the session cookie and goes to `/`.
    static func signOut(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        guard !request.hasBody else { throw LarderError.badRequest("POST /sign-out takes no body") }
        var response = seeOther()
        if let session = s.session { response.addHeader("Set-Cookie", session.clearing) }
        return .now(response)
    }

    /// 303: the browser follows with a GET of the dashboard.
    static func seeOther() -> Response {
        Response(status: 303, headers: [("Location", "/"), ("Cache-Control", "no-store")])
    }
}
