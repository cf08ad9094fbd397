import LarderCore
import MicroHTTP

extension Router {
    /// One method of a route: the query names it takes (the router refuses
    /// others before the handler runs) and its handler.
    struct Endpoint {
        let query: Set<String>
        let handler: RouteHandler
    }

    /// The route table: every path of the contract, with its methods.
    static func addRoutes(into routes: inout [Route]) {
        func add(_ name: String, _ methods: [String: Endpoint]) {
            let segments = name.split(separator: "/")
            let pattern = segments.map { $0.hasPrefix("{") ? "*" : String($0) }
            let names = segments.filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
            routes.append(Route(name: name, pattern: pattern, parameterNames: names, methods: methods))
        }
        func at(_ query: Set<String>, _ handler: @escaping RouteHandler) -> Endpoint { Endpoint(query: query, handler: handler) }
        func at(_ handler: @escaping RouteHandler) -> Endpoint { Endpoint(query: [], handler: handler) }
        add("/", ["GET": at(["cursor"], Dashboard.show)])
        add("/sign-in", ["POST": at(SignInRoutes.signIn)])
        add("/sign-out", ["POST": at(SignInRoutes.signOut)])
        add("/openapi.json", ["GET": at(ServiceRoutes.openAPI)])
        add("/health", ["GET": at(ServiceRoutes.health)])
        add("/metrics", ["GET": at(ServiceRoutes.metrics)])
        add("/templates", ["GET": at(TemplateRoutes.list)])
        add("/templates/{name}", ["GET": at(TemplateRoutes.show)])
        add("/stores/{id}/migrate", ["POST": at(MigrationRoutes.migrate)])
        add("/stores/{id}/migrations", ["GET": at(MigrationRoutes.migrations)])
        add("/stores/{id}/fixtures", ["POST": at(FixtureRoutes.fixtures)])
        add("/stores/{id}/reset", ["POST": at(StoreRoutes.reset)])
        add("/stores/{id}/counts", ["GET": at(["tables", "wait", "timeout_ms"], InspectRoutes.counts)])
        add("/stores/{id}/schema", ["GET": at(InspectRoutes.schema)])
        add("/stores/{id}/diff", ["GET": at(["limit", "tables"], InspectRoutes.diff)])
        add("/stores/{id}/page", ["GET": at(["table", "offset"], Dashboard.storePage)])
        add("/stores/{id}/query", ["POST": at(InspectRoutes.query)])
        add("/stores/{id}/artifact", ["GET": at(["compression"], ArtifactRoutes.artifact)])
        add("/stores/{id}/database", ["GET": at(ArtifactRoutes.database)])
        add("/builds", ["GET": at(BuildRoutes.list), "POST": at(BuildRoutes.claim)])
        add("/builds/{key}", ["GET": at(["wait", "timeout_ms"], BuildRoutes.show), "DELETE": at(BuildRoutes.discard)])
        add("/builds/{key}/finish", ["POST": at(BuildRoutes.finish)])
        add("/checks/migrations", ["GET": at(["template", "format", "round_trip", "data"], CheckRoutes.migrations)])
        add("/stores", [
            "GET": at(["label", "label_prefix", "template", "limit", "cursor"], StoreRoutes.list),
            // The query of a raw upload (a JSON body takes none: see `create`).
            "POST": at(["template", "version", "label", "ttl_seconds"], StoreRoutes.create),
            "DELETE": at(["label", "label_prefix"], StoreRoutes.deleteAll),
        ])
        add("/stores/{id}", ["GET": at(StoreRoutes.show), "PATCH": at(StoreRoutes.patch), "DELETE": at(StoreRoutes.delete)])
    }
}

/// Query values checked like body fields.
extension Request {
    func queryInt(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = queryValue(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw LarderError(.badRequest, "query parameter '\(name)' must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'",
                              details: [("parameter", .string(name))])
        }
        return value
    }

    /// A long poll's `timeout_ms`: within `--wait-timeout-max-ms`, the default when absent.
    func waitTimeoutMs(_ configuration: Configuration) throws -> Int {
        try queryInt("timeout_ms", in: 0...configuration.waitTimeoutMaxMs) ?? configuration.defaultWaitTimeoutMs
    }

    /// Refuses query parameters a route does not know.
    func checkQuery(allowed: Set<String>) throws {
        if let unknown = query.first(where: { !allowed.contains($0.name) }) {
            throw LarderError(.badRequest, "unknown query parameter '\(unknown.name)'" + (allowed.isEmpty ? "" : "; known: \(allowed.sorted().joined(separator: ", "))"),
                              details: [("parameter", .string(unknown.name))])
        }
    }
}

enum ServiceRoutes {
    static func openAPI(_ request: Request, _ c: RouteContext) -> Outcome {
        .now(Response(status: 200, contentType: jsonType, bytes: c.services.openAPI))
    }

    static func health(_ request: Request, _ c: RouteContext) -> Outcome {
        .now(json(200, healthBody(c.services)))
    }

    static func healthBody(_ s: Services) -> JSONValue {
        [
            "status": "ok", "version": .string(LarderVersion.current), "sqlite_version": .string(LarderVersion.sqlite),
            "stores": JSONValue(s.registry.count), "started_at": .string(s.startedAt.rfc3339),
        ]
    }

    static func metrics(_ request: Request, _ c: RouteContext) -> Outcome {
        let s = c.services
        let ready = s.provisioner.readyCopies.stats
        let text = s.metrics.render(gauges: [
            ("larder_live_stores", "Stores on disk now.", "gauge", String(s.registry.count)),
            ("larder_count_waits", "Count waits (long polls) under way.", "gauge", String(s.waiter.waiting)),
            ("larder_trash_backlog", "Deleted stores whose files are still being removed.", "gauge", String(s.registry.trashBacklog)),
            ("larder_store_bytes", "Bytes the stores take on disk (refreshed by the reaper).", "gauge", String(s.registry.diskBytes)),
            ("larder_quota_used_bytes", "Bytes counted against --max-disk-bytes: stores, their own bases, ready copies, copies and builds under way, the trash.",
             "gauge", String(s.registry.usedBytes)),
            ("larder_template_cache_hits_total", "Stores copied from a cached template.", "counter", String(s.cache.stats.hits)),
            ("larder_template_cache_misses_total", "Template databases built.", "counter", String(s.cache.stats.misses)),
            ("larder_template_cache_bytes", "Bytes the template cache takes.", "gauge", String(s.cache.stats.bytes)),
            ("larder_build_waits", "Store requests waiting for an app-built template to finish.", "gauge", String(s.builds.waiting)),
            ("larder_ready_copies", "Ready copies waiting to be handed out.", "gauge", String(ready.copies)),
            ("larder_ready_copy_bytes", "Bytes the ready copies take.", "gauge", String(ready.bytes)),
            ("larder_ready_copy_handouts_total", "Stores handed out from ready copies.", "counter", String(ready.handouts)),
            ("larder_ready_copy_misses_total", "Stores of a template entry made with no ready copy at hand.", "counter", String(ready.misses)),
        ])
        return .now(Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", bytes: Array(text.utf8)))
    }
}
