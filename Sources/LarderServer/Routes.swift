import LarderCore
import MicroHTTP

extension Router {
    /// The route table: every path of the contract, with its methods.
    static func addRoutes(into routes: inout [Route], services s: Services) {
        func add(_ name: String, _ methods: [String: RouteHandler]) {
            let segments = name.split(separator: "/")
            let pattern = segments.map { $0.hasPrefix("{") ? "*" : String($0) }
            let names = segments.filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
            routes.append(Route(name: name, pattern: pattern, parameterNames: names, methods: methods))
        }
        add("/", ["GET": { r, _ in try Dashboard.show(s, r) }])
        add("/sign-in", ["POST": { r, _ in try SignInRoutes.signIn(s, r) }])
        add("/sign-out", ["POST": { r, _ in try SignInRoutes.signOut(s, r) }])
        add("/openapi.json", ["GET": { _, _ in .now(Response(status: 200, contentType: jsonType, bytes: s.openAPI)) }])
        add("/health", ["GET": { _, _ in .now(json(200, ServiceRoutes.health(s))) }])
        add("/metrics", ["GET": { _, _ in .now(ServiceRoutes.metrics(s)) }])
        add("/templates", ["GET": { _, _ in try TemplateRoutes.list(s) }])
        add("/templates/{name}", ["GET": { _, c in try TemplateRoutes.show(s, c["name"]) }])
        add("/stores/{id}/migrate", ["POST": { r, c in try MigrationRoutes.migrate(s, r, c["id"]) }])
        add("/stores/{id}/migrations", ["GET": { _, c in try MigrationRoutes.migrations(s, c["id"]) }])
        add("/stores/{id}/fixtures", ["POST": { r, c in try FixtureRoutes.fixtures(s, r, c["id"]) }])
        add("/stores/{id}/reset", ["POST": { r, c in try StoreRoutes.reset(s, r, c["id"]) }])
        add("/stores/{id}/counts", ["GET": { r, c in try InspectRoutes.counts(s, r, c["id"]) }])
        add("/stores/{id}/schema", ["GET": { r, c in try InspectRoutes.schema(s, r, c["id"]) }])
        add("/stores/{id}/diff", ["GET": { r, c in try InspectRoutes.diff(s, r, c["id"]) }])
        add("/stores/{id}/page", ["GET": { r, c in try Dashboard.storePage(s, r, c["id"]) }])
        add("/stores/{id}/query", ["POST": { r, c in try InspectRoutes.query(s, r, c["id"]) }])
        add("/stores/{id}/artifact", ["GET": { r, c in try ArtifactRoutes.artifact(s, r, c) }])
        add("/stores/{id}/database", ["GET": { r, c in try ArtifactRoutes.database(s, r, c["id"]) }])
        add("/builds", [
            "GET": { r, _ in try BuildRoutes.list(s, r) },
            "POST": { r, _ in try BuildRoutes.claim(s, r) },
        ])
        add("/builds/{key}", [
            "GET": { r, c in try BuildRoutes.show(s, r, c["key"]) },
            "DELETE": { _, c in try BuildRoutes.discard(s, c["key"]) },
        ])
        add("/builds/{key}/finish", ["POST": { r, c in try BuildRoutes.finish(s, r, c["key"]) }])
        add("/checks/migrations", ["GET": { r, _ in try CheckRoutes.migrations(s, r) }])
        add("/stores", [
            "GET": { r, _ in try StoreRoutes.list(s, r) },
            "POST": { r, c in try StoreRoutes.create(s, r, c) },
            "DELETE": { r, _ in try StoreRoutes.deleteAll(s, r) },
        ])
        add("/stores/{id}", [
            "GET": { _, c in try StoreRoutes.show(s, c["id"]) },
            "PATCH": { r, c in try StoreRoutes.patch(s, r, c["id"]) },
            "DELETE": { _, c in try StoreRoutes.delete(s, c["id"]) },
        ])
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
    static func health(_ s: Services) -> JSONValue {
        [
            "status": "ok", "version": .string(LarderVersion.current), "sqlite_version": .string(LarderVersion.sqlite),
            "stores": JSONValue(s.registry.count), "started_at": .string(s.startedAt.rfc3339),
        ]
    }

    static func metrics(_ s: Services) -> Response {
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
        return Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", bytes: Array(text.utf8))
    }
}
