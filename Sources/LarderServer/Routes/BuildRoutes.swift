// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `/builds`: app-built templates, and stores made of them.
enum BuildRoutes {
    /// `POST /builds`: 201 to the caller who builds, 202 while another
    /// does, 200 once ready.
    static func claim(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let body = try JSONBody(request, RequestBody.createBuild, s.configuration)
        guard let key = try body.string("key") else { throw LarderError.badRequest("a build needs a 'key' (your fingerprint of its migrations)") }
        let label = try body.string("label")
        let answer: @Sendable () throws -> Response = {
            switch try s.builds.claim(key: key, label: label) {
            case .build(let info): return json(201, BuildAnswer.json(s, info))
            case .building(let info): return json(202, BuildAnswer.json(s, info))
            case .ready(let info): return json(200, BuildAnswer.json(s, info))
            }
        }
        // Making the builder's empty file is a few file calls, answered at
        // once; a look in the fleet's bucket first is a download: on the workers.
        return s.cache.fleet == nil ? .now(try answer()) : .later(answer)
    }

    /// `POST /builds/{key}/finish`: checks and copies the whole database, on the workers.
    static func finish(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, key = try c.parameter("key")
        _ = try JSONBody(request, .nothing, s.configuration)
        try BuildRegistry.check(key: key)
        return .later { json(200, BuildAnswer.json(s, try s.builds.finish(key))) }
    }

    static func discard(_ request: Request, _ c: RouteContext) throws -> Outcome {
        try c.server.builds.discard(c.parameter("key"))
        return .now(Response(status: 204))
    }

    static func list(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        return .now(json(200, BuildAnswer.list(s.builds.list().map { BuildAnswer.json(s, $0) })))
    }

    /// `GET /builds/{key}`; with `?wait=ready&timeout_ms=N` a long poll that
    /// answers once the build is no longer building: ready (200), discarded
    /// (404), or still building after N ms (408).
    static func show(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, key = try c.parameter("key")
        let info = try s.builds.info(key)
        guard let wait = request.queryValue("wait") else {
            if request.queryValue("timeout_ms") != nil { throw LarderError.badRequest("'timeout_ms' goes with 'wait'", reason: .timeoutWithoutWait) }
            return .now(json(200, BuildAnswer.json(s, info)))
        }
        guard wait == "ready" else { throw LarderError.badRequest("'wait' can only be 'ready', not '\(wait)'") }
        let timeout = try request.waitTimeoutMs(s.configuration)
        guard info.state == .building else { return .now(json(200, BuildAnswer.json(s, info))) }
        return .whenReady { respond in
            s.builds.whenReady(key, timeoutMs: timeout) { result in
                respond(Result {
                    do {
                        _ = try result.get()
                        return json(200, BuildAnswer.json(s, try s.builds.info(key)))
                    } catch {
                        throw LarderError.classify(error) ?? BuildRegistry.unknown(key)
                    }
                })
            }
        }
    }

    /// `POST /stores {"build": KEY, "timeout_ms": N}`: a copy of a ready
    /// build at once; while it builds, the request waits suspended (no request
    /// thread held) up to `timeout_ms`, then copies.
    static func createStore(_ c: RouteContext, key: String, timeoutMs: Int?, label: String?, ttlSeconds: Int?) throws -> Outcome {
        let s = c.server
        try BuildRegistry.check(key: key)
        let make: @Sendable (TemplateCache.Entry) throws -> Response = { entry in
            let (store, provenance) = try s.provisioner.create(build: key, entry: entry, label: label, ttlSeconds: ttlSeconds)
            return json(201, serialized: try StoreAnswer.serialized(s, store, counts: provenance.counts, sizeBytes: provenance.sizeBytes))
        }
        if !s.builds.isBuilding(key) { return .now(try make(try s.builds.entry(key))) }
        let timeout = timeoutMs ?? s.configuration.defaultWaitTimeoutMs
        return .whenReady { respond in
            s.builds.whenReady(key, timeoutMs: timeout) { result in
                switch result {
                case .success(let entry):
                    // Told on the finishing request's thread: the copy goes to the workers.
                    s.workers.submit(line: "build " + key) { respond(Result { try make(entry) }) }
                case .failure(let error):
                    respond(.failure(error))
                }
            }
        }
    }
}
