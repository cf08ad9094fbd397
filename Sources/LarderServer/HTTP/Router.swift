// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import LarderCore
import Logging
import MicroHTTP
import Synchronization

/// What a route handler gives back.
enum Outcome {
    /// Answer at once, on the pool thread (fast work only).
    case now(Response)
    /// Run on a worker thread while the connection is suspended.
    case later(@Sendable () throws -> Response)
    /// Register a callback that answers whenever it likes (long polls);
    /// answers how to cancel the wait should the client leave first.
    /// Errors it answers with are translated like any handler's.
    case whenReady(@Sendable (@escaping @Sendable (Result<Response, Error>) -> Void) -> @Sendable () -> Void)
}

/// What a handler knows besides the request itself: the server, the
/// path's named parameters, the request id, and a logger that carries it.
struct RouteContext: Sendable {
    let server: ServerContext
    let parameters: [String: String]
    let requestID: String

    /// The server's logger with the request's id on every line (made when a route logs).
    var logger: Logger { server.logger.with(requestID: requestID) }

    /// A path parameter by the name the route gives it (`{id}` → "id").
    subscript(_ name: String) -> String { parameters[name] ?? "" }
}

/// One route's handler.
typealias RouteHandler = @Sendable (Request, RouteContext) throws -> Outcome

/// Matches method and path to a handler; translates errors into the
/// contract's error body; counts requests for /metrics.
final class Router: Sendable {
    struct Route {
        let name: String
        let pattern: [String] // "*" matches one segment
        let parameterNames: [String] // of the "*" segments, in order
        var methods: [String: Operation]
    }

    let server: ServerContext
    private let routes: [Route]
    private let requestCounter = Atomic<Int>(0)

    init(server: ServerContext) {
        self.server = server
        var routes: [Route] = []
        for op in Routes.table(server.configuration) {
            if let i = routes.firstIndex(where: { $0.name == op.path }) {
                routes[i].methods[op.method] = op
            } else {
                let segments = op.path.split(separator: "/")
                routes.append(Route(name: op.path, pattern: segments.map { $0.hasPrefix("{") ? "*" : String($0) },
                                    parameterNames: segments.filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) },
                                    methods: [op.method: op]))
            }
        }
        self.routes = routes
    }

    func route(_ request: Request) -> Reply {
        let started = ContinuousClock.now
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let requestID = Router.requestID(given: request.header("x-request-id")) { "r\(requestCounter.wrappingAdd(1, ordering: .relaxed).newValue)" }
        var name = "unmatched"
        let finish: @Sendable (String, Response) -> Response = { [server] name, response in
            let elapsed = (ContinuousClock.now - started).components
            let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
            server.metrics.record(route: name, status: response.status, seconds: seconds)
            var line: Logger.Metadata = ["request_id": .string(requestID), "method": .string(request.method), "path": .string(request.path),
                                         "status": .stringConvertible(response.status), "ms": .stringConvertible((seconds * 1e6).rounded() / 1e3)]
            if let code = response.errorCode { line["error"] = .string(code) }
            server.logger.info("request", metadata: line)
            var answered = response
            answered.addHeader("X-Request-Id", requestID)
            return answered
        }
        // Every error, whenever it comes, becomes the contract's body here.
        let failed: @Sendable (Error) -> Response = { [server] in errorResponse(larderError($0, requestID: requestID, logger: server.logger)) }
        do {
            // Who may ask comes before what exists: no probing of routes
            // without the token, or from a foreign web page.
            try server.origins.check(request)
            guard let (route, parameters) = match(segments) else {
                try authorize(request, route: nil)
                throw LarderError(.notFound, "no route for \(request.method) \(request.path)", details: [("path", .string(request.path))])
            }
            name = route.name
            do {
                try authorize(request, route: route)
            } catch let error as LarderError where error.code == .unauthorized && Dashboard.pages.contains(route.name) && (request.method == "GET" || request.method == "HEAD") {
                // A browser at the dashboard gets a way in, not a JSON error.
                return .now(finish(name, Dashboard.signInPage(server, request: request)))
            }
            guard let endpoint = Router.operation(route, request.method) else {
                var response = errorResponse(LarderError(.methodNotAllowed, "\(request.method) is not allowed on \(route.name)",
                                                         details: [("allowed", JSONValue(route.methods.keys.sorted()))]))
                response.addHeader("Allow", route.methods.keys.sorted().joined(separator: ", "))
                return .now(finish(name, response))
            }
            try request.checkQuery(allowed: endpoint.queryNames)
            let context = RouteContext(server: server,
                                       parameters: Dictionary(zip(route.parameterNames, parameters), uniquingKeysWith: { a, _ in a }),
                                       requestID: requestID)
            switch try endpoint.handler(request, context) {
            case .now(let response):
                return .now(finish(name, response))
            case .later(let work):
                let routeName = name
                // One store's work waits in its own line (see WorkPool).
                let lane = context.parameters["id"].map { "store " + $0 } ?? context.parameters["key"].map { "build " + $0 }
                let pool = server.pool
                return .later { responder in
                    pool.submit(lane: lane) {
                        let response: Response
                        do { response = try work() } catch { response = failed(error) }
                        responder.send(finish(routeName, response))
                    }
                }
            case .whenReady(let register):
                let routeName = name
                return .later { responder in
                    let cancel = register { result in
                        let response: Response
                        switch result {
                        case .success(let answer): response = answer
                        case .failure(let error): response = failed(error)
                        }
                        responder.send(finish(routeName, response))
                    }
                    // A client that leaves releases its wait at once (499: client closed request).
                    responder.onHangup {
                        cancel()
                        responder.send(finish(routeName, Response(status: 499)))
                    }
                }
            }
        } catch {
            return .now(finish(name, failed(error)))
        }
    }

    /// The client's own request id when it is a sane one (1 to 128 of
    /// `A-Z a-z 0-9 . _ : -`), else a new one.
    static func requestID(given: String?, make: () -> String) -> String {
        if let given, (1...128).contains(given.utf8.count),
           given.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2E || $0 == 0x5F || $0 == 0x3A || $0 == 0x2D }) {
            return given
        }
        return make()
    }

    /// Every route's name and methods (for the OpenAPI test).
    var table: [(name: String, methods: [String])] { routes.map { ($0.name, $0.methods.keys.sorted()) } }

    /// The query names each `METHOD /path` takes (for the OpenAPI test).
    var queryNames: [String: Set<String>] {
        Dictionary(uniqueKeysWithValues: routes.flatMap { route in route.methods.map { ($0.key + " " + route.name, $0.value.queryNames) } })
    }

    private func match(_ segments: [String]) -> (Route, [String])? {
        outer: for route in routes where route.pattern.count == segments.count {
            var parameters: [String] = []
            for (p, s) in zip(route.pattern, segments) {
                if p == "*" { parameters.append(s) } else if p != s { continue outer }
            }
            return (route, parameters)
        }
        return nil
    }

    /// The operation a method names on a route: HEAD is GET without the body
    /// (libmicrohttpd leaves it out).
    private static func operation(_ route: Route, _ method: String) -> Operation? {
        route.methods[method] ?? (method == "HEAD" ? route.methods["GET"] : nil)
    }

    /// The token as a Bearer header, or the sign-in cookie a browser got for it.
    private func authorize(_ request: Request, route: Route?) throws {
        guard let token = server.configuration.token, route.flatMap({ Router.operation($0, request.method) })?.open != true else { return }
        if constantTimeEqual(request.header("authorization") ?? "", "Bearer " + token) { return }
        if server.session?.admits(request) == true { return }
        throw LarderError(.unauthorized, "this server needs 'Authorization: Bearer <token>' (a browser signs in at /)")
    }
}
