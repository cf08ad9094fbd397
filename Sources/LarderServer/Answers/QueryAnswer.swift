// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `POST /stores/{id}/query`'s answer: its schema. `QueryRunner` writes it
/// in the core, straight into bytes as the rows are read (the answer's size
/// budget is counted there).
enum QueryAnswer {
    /// A value: text, a number, null, or a blob as {"base64": "..."}.
    static let value: JSONValue = ["oneOf": [
        ["type": ["string", "number", "null"]],
        OpenAPI.answer([("base64", ["type": "string", "contentEncoding": "base64"])]),
    ]]
    /// A row as an object of column values.
    static let row: JSONValue = ["type": "object", "additionalProperties": value]

    static let object = ContractObject("QueryResult", OpenAPI.answer([
        ("columns", OpenAPI.strings),
        ("rows", ["type": "array", "items": ["type": "array", "items": value],
                  "description": "Rows as arrays in column order; a blob is {\"base64\": \"...\"}."]),
        ("changes", OpenAPI.nonNegative), ("truncated", OpenAPI.boolean),
    ]))
}
