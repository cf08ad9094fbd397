import LarderCore
import MicroHTTP

/// `/stores` and `/stores/{id}`.
enum StoreRoutes {
    static let createFields: Set<String> = ["template", "version", "snapshot", "fixtures", "label", "ttl_seconds", "from", "build", "timeout_ms"]

    static func create(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services
        if request.mediaType == "application/vnd.sqlite3" {
            let label = request.queryValue("label"), template = request.queryValue("template")
            // As in the JSON body: a template means its latest version unless
            // told otherwise; an empty `version=` keeps the upload as it is.
            let version = request.queryValue("version").map { $0.isEmpty ? nil : $0 } ?? (template == nil ? nil : "latest")
            let ttl = try request.queryInt("ttl_seconds", in: StoreRecord.ttlSeconds)
            // A large upload arrives in a spooled file (kept alive by this closure), a small one in memory.
            let spooled = request.bodyFile
            let upload: Provisioner.Upload = spooled.map { .file(path: $0.path, size: $0.size) } ?? .bytes(request.body)
            return .later {
                let (store, provenance) = try withExtendedLifetime(spooled) {
                    try s.provisioner.createFromUpload(upload, template: template, version: version, label: label, ttlSeconds: ttl)
                }
                return json(201, try render(s, store, counts: provenance.counts))
            }
        }
        try request.checkQuery(allowed: []) // a JSON body says it all
        let body = try JSONBody(request, allowed: createFields)
        var wanted = Provisioner.Request()
        wanted.label = try body.string("label")
        wanted.ttlSeconds = try body.int("ttl_seconds", in: StoreRecord.ttlSeconds)
        wanted.template = try body.string("template")
        wanted.fixtures = try body.stringArray("fixtures")
        wanted.snapshot = try body.string("snapshot")
        if body.has("version") { wanted.version = try body.string("version") }
        let timeout = try body.int("timeout_ms", in: 0...s.configuration.waitTimeoutMaxMs)
        if let key = try body.string("build") {
            guard wanted.template == nil, wanted.snapshot == nil, wanted.fixtures == nil, !body.has("version"), try body.string("from") == nil else {
                throw LarderError.badRequest("'build' copies an app-built template as it is: not with 'template', 'snapshot', 'version', 'fixtures' or 'from'")
            }
            return try BuildRoutes.createStore(c, key: key, timeoutMs: timeout, label: wanted.label, ttlSeconds: wanted.ttlSeconds)
        }
        if timeout != nil { throw LarderError.badRequest("'timeout_ms' goes with 'build' (how long to wait while it builds)") }
        if let source = try body.string("from") {
            guard wanted.template == nil, wanted.snapshot == nil, !body.has("version") else {
                throw LarderError.badRequest("'from' forks a live store as it is: not with 'template', 'snapshot' or 'version'")
            }
            let label = wanted.label, ttl = wanted.ttlSeconds, fixtures = wanted.fixtures
            // A copy of a live database, of any size: off the pool.
            return .later {
                let (store, provenance) = try s.provisioner.createFork(of: source, fixtures: fixtures, label: label, ttlSeconds: ttl)
                return json(201, try render(s, store, counts: provenance.counts))
            }
        }
        guard wanted.template != nil else {
            if wanted.fixtures != nil || wanted.snapshot != nil || body.has("version") {
                throw LarderError.badRequest("'version', 'snapshot' and 'fixtures' need a 'template'")
            }
            let (store, provenance) = try s.provisioner.createEmpty(label: wanted.label, ttlSeconds: wanted.ttlSeconds)
            return .now(json(201, try render(s, store, counts: provenance.counts)))
        }
        let plan = try s.provisioner.plan(wanted)
        let label = wanted.label, ttl = wanted.ttlSeconds
        let make: @Sendable () throws -> Response = {
            let (store, provenance) = try s.provisioner.create(plan, label: label, ttlSeconds: ttl)
            return json(201, try render(s, store, counts: provenance.counts))
        }
        // A cached template is a file copy: answer on the pool thread. A
        // first build runs migrations: do it off the pool.
        return s.provisioner.isCached(plan) ? .now(try make()) : .later(make)
    }

    static func list(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services
        let limit = try request.queryInt("limit", in: 1...10_000) ?? 100
        let page = try s.registry.list(label: request.queryValue("label"), labelPrefix: request.queryValue("label_prefix"),
                                       template: request.queryValue("template"),
                                       limit: limit, cursor: request.queryValue("cursor"))
        // Counts as last read: a list of thousands must not open every store.
        // Off the pool all the same, since stores never read are read now.
        return .later {
            var items: [JSONValue] = []
            for store in page.stores {
                do { items.append(try render(s, store, counts: store.lastCounts)) } catch let error as LarderError where error.code == .storeNotFound {}
            }
            return json(200, .object([("stores", .array(items)), ("next_cursor", JSONValue(page.nextCursor))]))
        }
    }

    /// `DELETE /stores?label=L` or `?label_prefix=P` (both: either matches): a whole suite's stores at once.
    static func deleteAll(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services
        let label = request.queryValue("label"), prefix = request.queryValue("label_prefix")
        guard label != nil || prefix != nil, label?.isEmpty != true, prefix?.isEmpty != true else {
            throw LarderError(.badRequest, "say which stores to delete: 'label' or 'label_prefix' (both: stores matching either), not empty")
        }
        return .later { json(200, ["deleted": .int(Int64(s.registry.deleteAll(label: label, prefix: prefix)))]) }
    }

    static func show(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services, id = c["id"]
        // Counts read the store, which its test may hold locked: off the pool threads.
        return .later { json(200, try render(s, try s.registry.get(id), counts: nil)) }
    }

    static func patch(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services, id = c["id"]
        let body = try JSONBody(request, allowed: ["keep", "ttl_seconds", "label"])
        var patch = StoreRegistry.Patch()
        patch.keep = try body.bool("keep")
        patch.ttlSeconds = try body.int("ttl_seconds", in: StoreRecord.ttlSeconds)
        if body.has("label") { patch.label = .some(try body.string("label")) }
        let change = patch
        return .later { json(200, try render(s, try s.registry.update(id, change), counts: nil)) }
    }

    /// `POST /stores/{id}/reset`: back to the creation state, in place.
    static func reset(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services, id = c["id"]
        _ = try JSONBody(request, allowed: [])
        return .later {
            let store = try s.editor.reset(id)
            return json(200, try render(s, store, counts: store.lastCounts))
        }
    }

    static func delete(_ request: Request, _ c: RouteContext) throws -> Outcome {
        try c.services.registry.delete(c["id"])
        return .now(Response(status: 204))
    }

    /// The contract's store object. Counts are read live unless the caller
    /// already knows them; a store whose test broke its file is still shown
    /// (and can be kept, to look at), with the counts Larder last read.
    static func render(_ s: Services, _ store: Store, counts known: [(String, Int64)]?) throws -> JSONValue {
        let record = store.record
        let counts: [(String, Int64)]
        do {
            counts = try known ?? store.counts()
        } catch where Store.isDamage(error) {
            counts = store.lastCounts ?? []
        }
        let base = s.base + "/stores/" + record.id
        let links: JSONValue = .object(OpenAPI.storeLinks.map {
            ($0, .string($0 == "self" ? base : base + "/" + $0))
        })
        return .object([
            ("id", .string(record.id)), ("path", .string(s.registry.clientPath(store.databasePath))),
            ("template", JSONValue(record.template)), ("version", JSONValue(record.version)),
            ("snapshot", JSONValue(record.snapshot)), ("fixtures", JSONValue(record.fixtures)), ("build", JSONValue(record.build)),
            ("label", JSONValue(record.label)), ("counts", JSONValue(counts: counts)),
            ("created_at", .string(record.createdAt.rfc3339)), ("expires_at", .string(record.expiresAt.rfc3339)),
            ("keep", .bool(record.keep)), ("size_bytes", .int(store.sizeBytes)), ("links", links),
        ])
    }
}
