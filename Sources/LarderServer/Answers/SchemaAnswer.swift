// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /stores/{id}/schema`'s answer: its schema. `Inspector.schema`
/// encodes it in the core, where migration checks compare two of them.
enum SchemaAnswer {
    /// A view or a trigger: its name, its table and its SQL.
    static let schemaObject = OpenAPI.answer([("name", OpenAPI.string), ("table", OpenAPI.string), ("sql", OpenAPI.nullableString)])
    static let names: JSONValue = ["type": "array", "items": OpenAPI.nullableString]

    static let object = ContractObject("Schema", OpenAPI.answer([
        ("tables", ["type": "array", "items": OpenAPI.answer([
            ("name", OpenAPI.string),
            ("columns", ["type": "array", "items": OpenAPI.answer([
                ("name", OpenAPI.string), ("type", OpenAPI.string), ("notnull", OpenAPI.boolean), ("default", OpenAPI.nullableString),
                ("pk", OpenAPI.nonNegative)])]),
            ("indexes", ["type": "array", "items": OpenAPI.answer([
                ("name", OpenAPI.string), ("unique", OpenAPI.boolean), ("origin", ["type": "string", "enum": ["c", "u", "pk"]]),
                ("partial", OpenAPI.boolean), ("columns", names)])]),
            ("foreign_keys", ["type": "array", "items": OpenAPI.answer([
                ("columns", names), ("table", OpenAPI.string), ("to", names), ("on_update", OpenAPI.string), ("on_delete", OpenAPI.string)])]),
        ])]),
        ("views", ["type": "array", "items": schemaObject]), ("triggers", ["type": "array", "items": schemaObject]),
        // Whether tables, views or triggers were left out past --query-max-bytes.
        ("truncated", OpenAPI.boolean),
    ]))
}
