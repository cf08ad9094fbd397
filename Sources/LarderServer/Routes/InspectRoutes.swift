// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP
import Text

/// `/counts` (and count waits), `/schema`, `/query`.
enum InspectRoutes {
    static func counts(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let store = try s.registry.get(c.parameter("id"))
        let tables = request.queryValue("tables").map(names)
        guard let waitText = request.queryValue("wait") else {
            if request.queryValue("timeout_ms") != nil { throw LarderError.badRequest("'timeout_ms' goes with 'wait'", reason: .timeoutWithoutWait) }
            return .later { json(200, CountsAnswer.json(try tables.map { t in try store.withReader { try Inspector.counts($0, tables: t) } } ?? store.counts())) }
        }
        let conditions = try CountCondition.parseList(waitText)
        let timeout = try request.waitTimeoutMs(s.configuration)
        let waitDescription = conditions.map(\.description).joined(separator: ",")
        return .whenReady { respond in
            // Unknown tables are a 400 now, not a timeout later (read here, on a worker: the store may be locked).
            do {
                _ = try store.withReader { try Inspector.counts($0, tables: Array(Set(conditions.map(\.table) + (tables ?? [])))) }
            } catch {
                respond(.failure(error))
                return {}
            }
            return s.waiter.wait(on: store, for: conditions, tables: tables, timeoutMs: timeout) { result in
                switch result {
                case .satisfied(let counts):
                    respond(.success(json(200, CountsAnswer.json(counts))))
                case .timedOut(let counts):
                    respond(.failure(LarderError(.timeout, "'\(waitDescription)' did not hold within \(timeout) ms",
                                                 details: [("counts", JSONValue(counts: counts)), ("wait", .string(waitDescription)),
                                                           ("timeout_ms", .int(Int64(timeout)))])))
                case .failed(let error):
                    respond(.failure(error))
                }
            }
        }
    }

    static func schema(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let store = try c.server.registry.get(c.parameter("id"))
        let maxBytes = c.server.configuration.queryMaxBytes
        return .later { json(200, try store.withReader { try Inspector.schema($0, maxBytes: maxBytes) }) }
    }

    /// What the test changed since the store was created.
    static func diff(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        var options = StoreDiff.Options()
        options.limit = try request.queryInt("limit", in: 0...10_000) ?? 100
        options.maxBytes = s.configuration.queryMaxBytes
        options.tables = try tableList(request)
        let store = try s.registry.get(c.parameter("id"))
        // Proportional to the tables' sizes: on the workers.
        return .later { [options] in json(200, DiffAnswer.json(try store.diff(options), base: store.record.creationDescription)) }
    }

    /// The names of a comma-separated list (`?tables=a, b`), blanks left out.
    static func names(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
    }

    /// `?tables=a,b` of a diff: nil when absent; a list of no names is a bad request.
    static func tableList(_ request: Request) throws -> [String]? {
        guard let text = request.queryValue("tables") else { return nil }
        let names = names(text)
        guard !names.isEmpty else { throw LarderError.badRequest("'tables' names no table; give them as tables=a,b") }
        return names
    }

    static func query(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let body = try JSONBody(request, RequestBody.query, s.configuration)
        guard let sql = try body.string("sql") else { throw LarderError.badRequest("field 'sql' is required") }
        let limit = try body.int("max_rows") ?? s.configuration.queryRowLimit
        let timeout = try body.int("timeout_ms") ?? s.configuration.readTimeoutMs
        let params = body.value("params")
        let store = try s.registry.get(c.parameter("id"))
        let maxBytes = s.configuration.queryMaxBytes
        return .later {
            // Queries from parallel tests may run together (SQLite locks
            // them); not while a migration or fixture load is under way.
            let result = try s.registry.operate(store, exclusive: nil, timeoutMs: timeout) { db in
                try QueryRunner.run(db, sql: sql, parameters: params, rowLimit: limit, maxBytes: maxBytes)
            }
            return Response(status: 200, contentType: jsonType, bytes: result.answer)
        }
    }
}
