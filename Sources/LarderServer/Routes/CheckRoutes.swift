// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `GET /checks/migrations` and `POST /stores/{id}/check`: JSON, or JUnit
/// XML with `?format=junit`.
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
        let junitAsked = try junitAsked(request)
        let run = try checks(s, template: template, roundTrips: roundTrips, dataCheck: dataCheck)
        return .later {
            let results = try run()
            let status = results.allSatisfy(\.passed) ? 200 : 422
            return junitAsked ? junit(status, results) : json(status, CheckAnswer.json(results))
        }
    }

    /// The migration checks of the fixtures folder (of `template`, which must
    /// exist: asked now), to run on the workers; the run is remembered as the
    /// dashboard's last.
    static func checks(_ s: ServerContext, template: String?, roundTrips: Bool = true, dataCheck: Bool = true) throws
        -> @Sendable () throws -> [MigrationCheck.Report] {
        if let template { _ = try s.catalog.template(template) }
        return {
            let results = try MigrationCheck(catalog: s.catalog, temporaryDirectory: s.layout.temporary)
                .run(template: template, roundTrips: roundTrips, dataCheck: dataCheck)
            s.lastCheck.withLock { $0 = (Timestamp.now, results) }
            return results
        }
    }

    /// `POST /stores/{id}/check`: judges a store the app's own migrator migrated.
    static func judge(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        let junitAsked = try junitAsked(request)
        let body = try JSONBody(request, RequestBody.checkStore, s.configuration)
        let reference = try CheckRoutes.reference(body.value("against"))
        let snapshot = try body.string("snapshot")
        let dataCheck = try body.bool("data") ?? true
        // JSON's null is "no expectations" (JSONValue takes nil as null: test it by name).
        let given = body.value("expect"), expect = given?.isNull == false ? given : nil
        if let expect {
            guard let members = expect.objectMembers else { throw LarderError.badRequest("field 'expect' must be an object (the .expect.json shape)") }
            if let unknown = members.first(where: { !MigrationCheck.expectationKeys.contains($0.0) }) {
                throw LarderError(.badRequest, "unknown field 'expect.\(unknown.0)'; known: \(MigrationCheck.expectationKeys.sorted().joined(separator: ", "))",
                                  details: [("field", .string("expect." + unknown.0))])
            }
        }
        let check = AppMigrationCheck(provisioner: s.provisioner, builds: s.builds)
        return .later {
            let report = try check.judge(id, against: reference, snapshot: snapshot, expect: expect, dataCheck: dataCheck)
            let status = report.passed ? 200 : 422
            return junitAsked ? junit(status, [report]) : json(status, CheckAnswer.json(report))
        }
    }

    /// `against`: exactly one of `{"build": KEY}`, `{"template": NAME, "version": V}` (V "latest" when absent), `{"store": ID}`.
    static func reference(_ value: JSONValue?) throws -> AppMigrationCheck.Reference {
        let usage = "field 'against' must be {\"build\": KEY}, {\"template\": NAME, \"version\": V} or {\"store\": ID}"
        guard let members = value?.objectMembers else { throw LarderError(.badRequest, usage, details: [("field", "against")]) }
        func text(_ key: String) throws -> String? {
            guard let value = members.first(where: { $0.0 == key })?.1, !value.isNull else { return nil }
            guard let s = value.stringValue, !s.isEmpty else { throw LarderError(.badRequest, "field 'against.\(key)' must be a non-empty string", details: [("field", .string("against." + key))]) }
            return s
        }
        let keys = Set(members.filter { !$0.1.isNull }.map(\.0))
        if let key = try text("build"), keys == ["build"] { return .build(key) }
        if let id = try text("store"), keys == ["store"] { return .store(id) }
        if let name = try text("template"), keys.isSubset(of: ["template", "version"]) { return .template(name, version: try text("version") ?? "latest") }
        throw LarderError(.badRequest, usage, details: [("field", "against")])
    }

    /// Whether `?format=junit` asks for JUnit XML (`json`, the default, for JSON).
    static func junitAsked(_ request: Request) throws -> Bool {
        let format = request.queryValue("format") ?? "json"
        guard format == "json" || format == "junit" else { throw LarderError.badRequest("format must be 'json' or 'junit', not '\(format)'") }
        return format == "junit"
    }

    static func junit(_ status: Int, _ results: [MigrationCheck.Report]) -> Response {
        Response(status: status, contentType: "application/xml; charset=utf-8", bytes: Array(MigrationCheck.junit(results).utf8))
    }
}
