import LarderCore
import MicroHTTP

/// `/stores/{id}/migrate` and `/stores/{id}/migrations`.
enum MigrationRoutes {
    static func migrate(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services, id = c["id"]
        let body = try JSONBody(request, allowed: ["to"])
        let target = try body.string("to") ?? "latest"
        return .later {
            let outcome = try s.editor.migrate(id, to: target)
            return json(200, [
                "from": JSONValue(outcome.from), "to": JSONValue(outcome.to),
                "applied": .array(outcome.applied.map { ["version": .string($0.version), "name": .string($0.name), "ms": JSONValue($0.milliseconds), "direction": .string($0.direction)] }),
            ])
        }
    }

    static func migrations(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services, id = c["id"]
        return .later {
            let status = try s.editor.migrations(id)
            return json(200, [
                "version": JSONValue(status.version), "dirty": .bool(status.dirty),
                "migrations": .array(status.migrations.map { ["version": .string($0.version), "name": .string($0.name), "state": .string($0.applied ? "applied" : "pending")] }),
            ])
        }
    }
}
