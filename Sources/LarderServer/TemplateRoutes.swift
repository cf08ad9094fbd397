import LarderCore
import MicroHTTP

/// `/templates`, and the per-store migration and fixture routes.
enum TemplateRoutes {
    static func summary(_ t: Template) -> [(String, JSONValue)] {
        [
            ("name", .string(t.name)), ("format", .string(t.migrations.format.rawValue)),
            ("versions", JSONValue(t.migrations.versions)), ("latest", JSONValue(t.migrations.latest)),
            ("fixtures", JSONValue(t.fixtureNames)), ("snapshots", JSONValue(t.snapshotNames)),
            ("default_fixtures", JSONValue(t.defaultFixtures)),
        ]
    }

    static func list(_ s: Services) throws -> Outcome {
        var items: [JSONValue] = []
        for name in s.catalog.names() {
            do {
                items.append(.object(summary(try s.catalog.template(name))))
            } catch let error as LarderError {
                items.append(["name": .string(name), "error": error.body["error"] ?? .null])
            }
        }
        return .now(json(200, ["templates": .array(items)]))
    }

    static func show(_ s: Services, _ name: String) throws -> Outcome {
        let t = try s.catalog.template(name)
        var members = summary(t)
        members.append(("migrations", .array(t.migrations.migrations.map { m in
            ["version": .string(m.version), "name": .string(m.name), "file": .string(m.file), "checksum": .string(m.checksum),
             "down": .bool(m.down != nil), "transaction": .bool(!m.noTransaction)]
        })))
        if !t.migrations.repeatables.isEmpty {
            members.append(("repeatables", .array(t.migrations.repeatables.map { ["name": .string($0.name), "file": .string($0.file), "checksum": .string($0.checksum)] })))
        }
        members.append(("snapshot_details", .array(t.snapshotNames.map { n in
            let snap = t.snapshots[n]!
            return ["name": .string(n), "sha256": .string(snap.sha256), "expect": snap.expect ?? .null]
        })))
        return .now(json(200, .object(members)))
    }

    static func migrate(_ s: Services, _ request: Request, _ id: String) throws -> Outcome {
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

    static func migrations(_ s: Services, _ id: String) throws -> Outcome {
        let status = try s.editor.migrations(id)
        return .now(json(200, [
            "version": JSONValue(status.version), "dirty": .bool(status.dirty),
            "migrations": .array(status.migrations.map { ["version": .string($0.version), "name": .string($0.name), "state": .string($0.applied ? "applied" : "pending")] }),
        ]))
    }

    static func fixtures(_ s: Services, _ request: Request, _ id: String) throws -> Outcome {
        let body = try JSONBody(request, allowed: ["fixtures", "sql", "rows"])
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
            return json(200, ["loaded": JSONValue(loaded), "counts": JSONValue(counts: counts)])
        }
    }
}
