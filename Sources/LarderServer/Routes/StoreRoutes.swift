// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FoundationEssentials
import LarderCore
import MicroHTTP
import Synchronization

/// `/stores` and `/stores/{id}`.
enum StoreRoutes {
    /// `POST /stores`: a store made one of five ways (see `StoreCreation`).
    static func create(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let (creation, label, ttl) = try StoreCreation.read(request, s.configuration)
        let made: @Sendable ((Store, Provenance)) throws -> Response = {
            json(201, serialized: try StoreAnswer.serialized(s, $0.0, counts: $0.1.counts, sizeBytes: $0.1.sizeBytes))
        }
        switch creation {
        case .upload(let upload, let format, let spooled, let template, let version):
            // The spooled file is kept alive by this closure until the store has it.
            return .later {
                try made(withExtendedLifetime(spooled) {
                    try s.provisioner.createFromUpload(upload, format: format, maxBytes: s.configuration.maxBodyBytes, template: template, version: version,
                                                       label: label, ttlSeconds: ttl)
                })
            }
        case .build(let key, let timeout):
            return try BuildRoutes.createStore(c, key: key, timeoutMs: timeout, label: label, ttlSeconds: ttl)
        case .fork(let source, let fixtures):
            // A copy of a live database, of any size: on the workers.
            return .later { try made(s.provisioner.createFork(of: source, fixtures: fixtures, label: label, ttlSeconds: ttl)) }
        case .empty:
            let make: @Sendable () throws -> Response = { try made(s.provisioner.createEmpty(label: label, ttlSeconds: ttl)) }
            return s.registry.synced ? .later(make) : .now(try make())
        case .template(let wanted):
            let plan = try s.provisioner.plan(wanted)
            let make: @Sendable () throws -> Response = { try made(s.provisioner.create(plan, label: label, ttlSeconds: ttl)) }
            // A cached template is a file copy: answer on the request thread. A
            // first build runs migrations: do it on the workers. So does a hand-out
            // that waits for the disk (with two request threads two waits at most
            // would share a sync; on the workers, all that arrive together).
            return s.provisioner.isCached(plan) && !s.registry.synced ? .now(try make()) : .later(make)
        }
    }

    static func list(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let limit = try request.queryInt("limit", in: 1...10_000) ?? 100
        let page = try s.registry.list(label: request.queryValue("label"), labelPrefix: request.queryValue("label_prefix"),
                                       template: request.queryValue("template"),
                                       limit: limit, cursor: request.queryValue("cursor"))
        // Counts as last read: a list of thousands must not open every store.
        // On the workers all the same, since stores never read are read now.
        return .later {
            // A long page is written on every core, a part each, every part
            // into one buffer (a store deleted meanwhile is left out).
            let stores = page.stores
            let parts = stores.count >= 256 ? max(ProcessInfo.processInfo.activeProcessorCount, 1) : 1
            let rendered = Mutex((parts: [[UInt8]](repeating: [], count: parts), error: Error?.none))
            DispatchQueue.concurrentPerform(iterations: parts) { part in
                let mine = stores.count * part / parts..<stores.count * (part + 1) / parts
                var w = JSONWriter(capacity: 1400 * mine.count)
                let writer = StoreAnswer.Writer(s)
                for i in mine {
                    do {
                        try writer.write(stores[i], counts: stores[i].lastCounts, into: &w)
                    } catch let error as LarderError where error.code == .storeNotFound {
                    } catch {
                        rendered.withLock { $0.error = $0.error ?? error }
                        return
                    }
                }
                let bytes = w.bytes
                rendered.withLock { $0.parts[part] = bytes }
            }
            let (written, error) = rendered.withLock { ($0.parts, $0.error) }
            if let error { throw error }
            // (Sent as the parts were written, never joined.)
            return Response(status: 200, headers: [("Content-Type", jsonType)],
                            body: .pieces(StoreAnswer.listBody(serialized: written, next: page.nextCursor)))
        }
    }

    /// `DELETE /stores?label=L` or `?label_prefix=P` (both: either matches): a whole suite's stores at once.
    static func deleteAll(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let label = request.queryValue("label"), prefix = request.queryValue("label_prefix")
        guard label != nil || prefix != nil, label?.isEmpty != true, prefix?.isEmpty != true else {
            throw LarderError.badRequest("say which stores to delete: 'label' or 'label_prefix' (both: stores matching either), not empty",
                                         reason: .noSelector)
        }
        return .later { json(200, StoreAnswer.deleted(s.registry.deleteAll(label: label, prefix: prefix))) }
    }

    static func show(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        // Counts read the store, which its test may hold locked: on the workers.
        return .later { json(200, serialized: try StoreAnswer.serialized(s, try s.registry.get(id), counts: nil)) }
    }

    static func patch(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        let body = try JSONBody(request, RequestBody.patchStore, s.configuration)
        var patch = StoreRegistry.Patch()
        if let keep = body.value("keep"), !keep.isNull {
            switch (keep.boolValue, keep.stringValue) {
            case (true?, _): patch.keep = .yes
            case (false?, _): patch.keep = .no
            case (_, "forever"?): patch.keep = .forever
            default:
                throw LarderError(.badRequest, "field 'keep' must be true, false or \"forever\", not \(keep.stringValue.map { "\"\($0.prefix(40))\"" } ?? keep.typeName)",
                                  details: [("field", .string("keep"))])
            }
        }
        patch.ttlSeconds = try body.int("ttl_seconds")
        if body.has("label") { patch.label = .some(try body.string("label")) }
        let change = patch
        return .later {
            let store = try s.registry.update(id, change)
            // Kept because its test failed: its artifact goes to the fleet's bucket too.
            if change.keep == .yes || change.keep == .forever { s.artifactUploads?.upload(store, s) }
            return json(200, serialized: try StoreAnswer.serialized(s, store, counts: nil))
        }
    }

    /// `POST /stores/{id}/reset`: back to the creation state, in place.
    static func reset(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        _ = try JSONBody(request, .nothing, s.configuration)
        return .later {
            let store = try s.editor.reset(id)
            return json(200, serialized: try StoreAnswer.serialized(s, store, counts: store.lastCounts))
        }
    }

    /// `PUT /stores/{id}/database`: a test's copy of the store, checked in.
    static func checkIn(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        guard let format = StoreCreation.uploadFormat(request.mediaType) else {
            throw LarderError(.unsupportedMediaType, "send the database (Content-Type: application/vnd.sqlite3), or a zip of it with its -wal "
                                  + "(application/zip)" + (request.mediaType.map { ", not \($0)" } ?? ""),
                              details: [("content_type", JSONValue(request.mediaType))])
        }
        guard request.hasBody else { throw LarderError.badRequest("the body is the database to check in; it is empty", reason: .notADatabase) }
        let (upload, spooled) = StoreCreation.rawBody(request)
        return .later {
            // The spooled file is kept alive by this closure until the store has it.
            let store = try withExtendedLifetime(spooled) {
                try s.editor.checkIn(id, upload, format: format, maxBytes: s.configuration.maxBodyBytes)
            }
            return json(200, serialized: try StoreAnswer.serialized(s, store, counts: store.lastCounts))
        }
    }

    static func delete(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let registry = c.server.registry, id = try c.parameter("id")
        // On the request thread only when nothing waits: neither the disk
        // (see `create`) nor an operation under way that the deletion stops.
        let delete: @Sendable () throws -> Response = { try registry.delete(id); return Response(status: 204) }
        guard !registry.synced, !(try registry.get(id)).hasWorkUnderWay else { return .later(delete) }
        return .now(try delete())
    }

}
