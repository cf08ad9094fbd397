// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /stores/{id}/diff`'s answer, an artifact's `diff.json` too: its
/// encoding and its schema.
enum DiffAnswer {
    /// The changes, `base` saying what the store was created as.
    @Sendable static func json(_ changes: StoreDiff.Changes, base: String) -> JSONValue {
        func list(_ kind: SchemaChange.Kind) -> JSONValue { .array(changes.schema.filter { $0.kind == kind }.map(json)) }
        return .object([
            ("base", .string(base)),
            ("schema", .object([("added", list(.added)), ("removed", list(.removed)), ("changed", list(.changed))])),
            ("tables", .object(changes.tables.map { ($0.0, json($0.1)) })),
        ])
    }

    static func json(_ change: SchemaChange) -> JSONValue {
        var members: [(String, JSONValue)] = [("type", .string(change.type)), ("name", .string(change.name))]
        if let table = change.table { members.append(("table", .string(table))) }
        if let old = change.old { members.append(("old", old)) }
        if let new = change.new { members.append(("new", new)) }
        return .object(members)
    }

    static func json(_ table: StoreDiff.TableChanges) -> JSONValue {
        .object([("inserted", .int(table.inserted)), ("updated", .int(table.updated)), ("deleted", .int(table.deleted)),
                 ("rows", .array(table.rows)), ("truncated", .bool(table.truncated))])
    }

    static let object = ContractObject("Diff", OpenAPI.answer([
        ("base", OpenAPI.string),
        ("schema", OpenAPI.answer(["added", "removed", "changed"].map { kind in
            (kind, ["type": "array", "items": [
                "type": "object", "required": ["type", "name"],
                "properties": ["type": ["type": "string", "enum": ["table", "column", "index", "foreign_keys", "view", "trigger"]],
                               "name": OpenAPI.string, "table": OpenAPI.string, "old": [:], "new": [:]],
            ]] as JSONValue)
        })),
        ("tables", ["type": "object", "additionalProperties": OpenAPI.answer([
            ("inserted", OpenAPI.nonNegative), ("updated", OpenAPI.nonNegative), ("deleted", OpenAPI.nonNegative), ("truncated", OpenAPI.boolean),
            ("rows", ["type": "array", "items": OpenAPI.answer([
                ("op", ["type": "string", "enum": ["insert", "update", "delete"]]),
                ("key", QueryAnswer.row), ("old", ["oneOf": [QueryAnswer.row, ["type": "null"]]]),
                ("new", ["oneOf": [QueryAnswer.row, ["type": "null"]]]),
            ])]),
        ])]),
    ]))
}
