import LarderCore
import MicroHTTP

/// `GET /checks/migrations`: JSON, or JUnit XML with `?format=junit`.
enum CheckRoutes {
    static func migrations(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let template = request.queryValue("template")
        func flag(_ name: String) throws -> Bool {
            switch request.queryValue(name) ?? "true" {
            case "true", "1": return true
            case "false", "0": return false
            case let other: throw LarderError.badRequest("\(name) must be 'true' or 'false', not '\(other)'")
            }
        }
        let roundTrips = try flag("round_trip"), dataCheck = try flag("data")
        let format = request.queryValue("format") ?? "json"
        guard format == "json" || format == "junit" else { throw LarderError.badRequest("format must be 'json' or 'junit', not '\(format)'") }
        if let template { _ = try s.catalog.template(template) }
        return .later {
            let check = MigrationCheck(catalog: s.catalog, temporaryDirectory: s.layout.temporary)
            let results = try check.run(template: template, roundTrips: roundTrips, dataCheck: dataCheck)
            s.lastCheck.withLock { $0 = (Timestamp.now, results) }
            let status = results.allSatisfy(\.passed) ? 200 : 422
            if format == "junit" {
                return Response(status: status, contentType: "application/xml; charset=utf-8", bytes: Array(MigrationCheck.junit(results).utf8))
            }
            return json(status, CheckAnswer.json(results))
        }
    }

}
