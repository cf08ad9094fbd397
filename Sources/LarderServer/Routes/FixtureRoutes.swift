// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `/stores/{id}/fixtures`: named fixtures, inline SQL or rows, all or nothing.
enum FixtureRoutes {
    static func fixtures(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        let body = try JSONBody(request, RequestBody.loadFixtures, s.configuration)
        let given = ["fixtures", "sql", "rows"].filter { body.has($0) }
        guard given.count == 1 else {
            throw LarderError.badRequest("send exactly one of 'fixtures', 'sql' or 'rows'" + (given.isEmpty ? "" : " (got \(given.joined(separator: ", ")))"))
        }
        let what: StoreEditor.FixtureRequest
        if let names = try body.stringArray("fixtures") {
            what = .names(names)
        } else if let sql = try body.string("sql") {
            what = .sql(sql)
        } else {
            guard let rows = body.value("rows"), rows.objectMembers != nil else { throw LarderError.badRequest("field 'rows' must be an object of tables") }
            what = .rows(rows)
        }
        return .later {
            let (loaded, counts) = try s.editor.loadFixtures(id, what)
            return json(200, CountsAnswer.loaded(loaded, counts: counts))
        }
    }
}
