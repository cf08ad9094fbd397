// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import LarderCore
import Logging
import MicroHTTP
import Synchronization

/// What a route handler gives back.
enum Outcome {
    /// Answer at once, on the request thread (fast work only).
    case now(Response)
    /// Run on the workers while the connection is suspended (the operation's `Lane`).
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

    /// A path parameter by the name the route gives it (`{id}` → "id");
    /// a name the route does not have is a mistake of the route table's.
    func parameter(_ name: String) throws -> String {
        guard let value = parameters[name] else {
            throw LarderError(.internalError, "the route has no path parameter '\(name)'")
        }
        return value
    }
}

/// One route's handler.
typealias RouteHandler = @Sendable (Request, RouteContext) throws -> Outcome

/// Routes a request through its steps: who may ask (origin, token, the
/// dashboard's sign-in form), what is asked (route, method, query names),
/// then where its work runs (the operation's lane). Every answer, error or
/// not, is finished in one place: the contract's error body, the request
/// id, the log line and the metrics.
final class Router: Sendable {
    struct Route {
        let name: String
        let pattern: [String] // "*" matches one segment
        let parameterNames: [String] // of the "*" segments, in order
        var methods: [String: Operation]
        /// Each method's `Operation.statuses`, worked out once.
        var statuses: [String: Set<Int>] = [:]
    }

    let server: ServerContext
    private let routes: [Route]
    private let requestCounter = Atomic<Int>(0)

    init(server: ServerContext) {
        self.server = server
        var routes: [Route] = []
        for op in Routes.table(server.configuration) {
            if case .workers(let line) = op.lane, let parameter = line.parameter {
                precondition(op.path.contains("{\(parameter)}"), "\(op.method) \(op.path): its line is named by {\(parameter)}, which it lacks")
            }
            if let i = routes.firstIndex(where: { $0.name == op.path }) {
                routes[i].methods[op.method] = op
                routes[i].statuses[op.method] = op.statuses
            } else {
                let segments = op.path.split(separator: "/")
                routes.append(Route(name: op.path, pattern: segments.map { $0.hasPrefix("{") ? "*" : String($0) },
                                    parameterNames: segments.filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) },
                                    methods: [op.method: op], statuses: [op.method: op.statuses]))
            }
        }
        self.routes = routes
    }

    func route(_ request: Request) -> Reply {
        let exchange = Exchange(server: server, request: request,
                                requestID: Router.requestID(given: request.header("x-request-id")) { "r\(requestCounter.wrappingAdd(1, ordering: .relaxed).newValue)" })
        do {
            // Who may ask comes before what exists: no probing of routes
            // without the token, or from a foreign web page.
            try server.origins.check(request)
            guard let (route, parameters) = match(request) else {
                try authorize(request, nil)
                throw LarderError(.notFound, "no route for \(request.method) \(request.path)", details: [("path", .string(request.path))])
            }
            exchange.name = route.name
            let endpoint = Router.operation(route, request.method)
            exchange.declared = endpoint.flatMap { route.statuses[$0.method] }
            if let form = try signInFormInstead(request, endpoint) { return .now(exchange.finish(form)) }
            guard let endpoint else { return .now(exchange.finish(Router.methodNotAllowed(request, route))) }
            try request.checkQuery(allowed: endpoint.queryNames)
            let context = RouteContext(server: server, parameters: Dictionary(zip(route.parameterNames, parameters), uniquingKeysWith: { a, _ in a }),
                                       requestID: exchange.requestID)
            return try run(endpoint.handler(request, context), in: endpoint.lane, context, exchange)
        } catch {
            return .now(exchange.finish(exchange.failed(error)))
        }
    }

    /// The token check, but for a browser at a dashboard page, which gets
    /// the sign-in form instead of the JSON error (the operation says so).
    private func signInFormInstead(_ request: Request, _ endpoint: Operation?) throws -> Response? {
        do {
            try authorize(request, endpoint)
            return nil
        } catch let error as LarderError where error.code == .unauthorized && endpoint?.signInForm == true {
            return Dashboard.signInPage(server, request: request)
        }
    }

    /// 405, with the methods the route has in `Allow`.
    private static func methodNotAllowed(_ request: Request, _ route: Route) -> Response {
        let allowed = route.methods.keys.sorted()
        var response = errorResponse(LarderError(.methodNotAllowed, "\(request.method) is not allowed on \(route.name)",
                                                 details: [("allowed", JSONValue(allowed))]))
        response.addHeader("Allow", allowed.joined(separator: ", "))
        return response
    }

    /// Answers what the handler gave back, in the operation's lane.
    private func run(_ outcome: Outcome, in lane: Lane, _ context: RouteContext, _ exchange: Exchange) throws -> Reply {
        switch outcome {
        case .now(let response):
            return .now(exchange.finish(response))
        case .later(let work):
            guard case .workers(let line) = lane else {
                throw LarderError(.internalError, "\(exchange.name) runs on the request thread, and its handler gave work for the workers")
            }
            let key = line.parameter.flatMap { name in context.parameters[name].map { "\(line) " + $0 } }
            let workers = server.workers
            return .later { responder in
                workers.submit(line: key) {
                    let response: Response
                    do { response = try work() } catch { response = exchange.failed(error) }
                    responder.send(exchange.finish(response))
                }
            }
        case .whenReady(let register):
            return .later { responder in
                let cancel = register { result in
                    let response: Response
                    switch result {
                    case .success(let answer): response = answer
                    case .failure(let error): response = exchange.failed(error)
                    }
                    responder.send(exchange.finish(response))
                }
                // A client that leaves releases its wait at once (499: client closed request).
                responder.onHangup {
                    cancel()
                    responder.send(exchange.finish(Response(status: 499)))
                }
            }
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

    private func match(_ request: Request) -> (Route, [String])? {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
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
    private func authorize(_ request: Request, _ endpoint: Operation?) throws {
        guard let token = server.configuration.token, endpoint?.open != true else { return }
        if constantTimeEqual(request.header("authorization") ?? "", "Bearer " + token) { return }
        if server.session?.admits(request) == true { return }
        throw LarderError(.unauthorized, "this server needs 'Authorization: Bearer <token>' (a browser signs in at /)")
    }
}

/// One request on its way through the router: its id and its clock, and
/// what every answer gets on its way out.
private final class Exchange: @unchecked Sendable {
    let server: ServerContext
    let method: String
    let path: String
    let requestID: String
    let started = ContinuousClock.now
    /// The route's name for logs and metrics, once matched (set before any work is handed on).
    var name = "unmatched"
    /// What its operation may answer, once known: any other status is the contract's drift.
    var declared: Set<Int>?

    init(server: ServerContext, request: Request, requestID: String) {
        self.server = server
        method = request.method
        path = request.path
        self.requestID = requestID
    }

    /// The contract's error body for any error, whenever it comes.
    func failed(_ error: Error) -> Response {
        errorResponse(larderError(error, requestID: requestID, logger: server.logger))
    }

    /// The answer as sent: its request id, its log line and its metrics.
    func finish(_ response: Response) -> Response {
        let elapsed = (ContinuousClock.now - started).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        server.metrics.record(route: name, status: response.status, seconds: seconds)
        var line: Logger.Metadata = ["request_id": .string(requestID), "method": .string(method), "path": .string(path),
                                     "status": .stringConvertible(response.status), "ms": .stringConvertible((seconds * 1e6).rounded() / 1e3)]
        if let code = response.errorCode { line["error"] = .string(code) }
        server.logger.info("request", metadata: line)
        if let declared, !declared.contains(response.status) { undeclared(response, line) }
        var answered = response
        answered.addHeader("X-Request-Id", requestID)
        return answered
    }

    /// Counts and logs (once a kind) an answer its operation does not declare.
    private func undeclared(_ response: Response, _ line: Logger.Metadata) {
        let kind = "\(method) \(name) \(response.status)"
        let first = server.undeclared.withLock { seen in
            defer { seen[kind, default: 0] += 1 }
            return seen[kind] == nil
        }
        if first { server.logger.error("an answer the contract does not declare: fix the route's statuses", metadata: line) }
    }
}
