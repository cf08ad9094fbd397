// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `/stores/{id}/migrate` and `/stores/{id}/migrations`.
enum MigrationRoutes {
    static func migrate(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        let body = try JSONBody(request, RequestBody.migrate, s.configuration)
        let target = try body.string("to") ?? "latest"
        return .later { json(200, MigrationAnswer.json(try s.editor.migrate(id, to: target))) }
    }

    static func migrations(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        return .later { json(200, MigrationAnswer.json(try s.editor.migrations(id))) }
    }
}
