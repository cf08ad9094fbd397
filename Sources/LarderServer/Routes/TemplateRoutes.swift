import LarderCore
import MicroHTTP

/// `/templates` and `/templates/{name}`.
enum TemplateRoutes {
    static func summary(_ t: Template) -> [(String, JSONValue)] {
        [
            ("name", .string(t.name)), ("format", .string(t.migrations.format.rawValue)),
            ("versions", JSONValue(t.migrations.versions)), ("latest", JSONValue(t.migrations.latest)),
            ("fixtures", JSONValue(t.fixtureNames)), ("snapshots", JSONValue(t.snapshotNames)),
            ("default_fixtures", JSONValue(t.defaultFixtures)),
        ]
    }

    static func list(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services
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

    static func show(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let t = try c.services.catalog.template(c["name"])
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
}
