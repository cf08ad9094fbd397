// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `/templates` and `/templates/{name}`.
enum TemplateRoutes {
    static func list(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        var items: [JSONValue] = []
        for name in s.catalog.names() {
            do {
                items.append(.object(TemplateAnswer.summary(try s.catalog.template(name))))
            } catch let error as LarderError {
                items.append(["name": .string(name), "error": error.body["error"] ?? .null])
            }
        }
        return .now(json(200, TemplateAnswer.list(items)))
    }

    static func show(_ request: Request, _ c: RouteContext) throws -> Outcome {
        .now(json(200, TemplateAnswer.json(try c.server.catalog.template(c.parameter("name")))))
    }
}
