// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The contract's template objects: the summary `/templates` lists and the
/// whole of one `/templates/{name}` shows, encodings and OpenAPI schemas
/// side by side.
enum TemplateAnswer {
    /// What both say of a template.
    static let fields: [(String, JSONValue)] = [
        ("name", OpenAPI.templateName), ("format", ["type": "string", "enum": .array(MigrationFormat.names.map { .string($0) })]),
        ("versions", OpenAPI.strings), ("latest", OpenAPI.nullableString), ("fixtures", OpenAPI.strings),
        ("default_fixtures", OpenAPI.strings), ("snapshots", OpenAPI.strings),
    ]

    static let summarySchema = OpenAPI.answer(fields)

    static let schema: JSONValue = {
        let checksum: JSONValue = ["type": "string", "pattern": "^[0-9a-f]{64}$"]
        var whole = OpenAPI.answer(fields + [
            ("migrations", ["type": "array", "items": OpenAPI.answer([
                ("version", OpenAPI.string), ("name", OpenAPI.string), ("file", OpenAPI.string), ("checksum", checksum),
                ("down", OpenAPI.boolean), ("transaction", OpenAPI.boolean)])]),
            ("snapshot_details", ["type": "array", "items": OpenAPI.answer([
                ("name", OpenAPI.string), ("sha256", checksum),
                ("expect", ["type": ["object", "null"], "description": "The snapshot's .expect.json, as written."])])]),
        ])
        // Only for a template with Flyway's repeatable migrations.
        if case .object(var members) = whole, let at = members.firstIndex(where: { $0.0 == "properties" }),
           case .object(var properties) = members[at].1 {
            properties.append(("repeatables", ["type": "array", "items": OpenAPI.answer([
                ("name", OpenAPI.string), ("file", OpenAPI.string), ("checksum", checksum)])]))
            members[at].1 = .object(properties)
            whole = .object(members)
        }
        return whole
    }()

    static let summaryObject = ContractObject("TemplateSummary", summarySchema)
    static let listObject = ContractObject("TemplateList", refers: [summaryObject],
                                           OpenAPI.answer([("templates", ["type": "array", "items": summaryObject.ref])]))
    static let object = ContractObject("Template", schema)

    /// The listing: a template that cannot be read is listed by its name and error.
    static func list(_ templates: [JSONValue]) -> JSONValue { ["templates": .array(templates)] }

    static func summary(_ t: Template) -> [(String, JSONValue)] {
        [
            ("name", .string(t.name)), ("format", .string(t.migrations.format.rawValue)),
            ("versions", JSONValue(t.migrations.versions)), ("latest", JSONValue(t.migrations.latest)),
            ("fixtures", JSONValue(t.fixtureNames)), ("snapshots", JSONValue(t.snapshotNames)),
            ("default_fixtures", JSONValue(t.defaultFixtures)),
        ]
    }

    static func json(_ t: Template) -> JSONValue {
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
        return .object(members)
    }
}
