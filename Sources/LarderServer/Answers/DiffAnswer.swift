// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /stores/{id}/diff`'s answer: its schema. `StoreDiff.Changes.json`
/// encodes it in the core, where an artifact's `diff.json` is the same object.
enum DiffAnswer {
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
