// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// A request body described once: its fields, each with its type and, for
/// a number, its range. The OpenAPI document's schema is made from it
/// (`contract`), and `JSONBody` and `FormBody` read a request by it (no
/// field it lacks, a number within its range), so the two cannot disagree.
struct BodyFields: Sendable {
    let name: String
    let fields: [Field]
    let required: [String]
    /// What the document says across fields (rules, examples); the route checks those rules itself.
    let extra: @Sendable (Configuration) -> [(String, JSONValue)]
    /// The fields' names, made once (every request's body is checked against them).
    let names: Set<String>

    init(name: String, fields: [Field], required: [String] = [], extra: @escaping @Sendable (Configuration) -> [(String, JSONValue)] = { _ in [] }) {
        self.name = name
        self.fields = fields
        self.required = required
        self.extra = extra
        names = Set(fields.map(\.name))
    }

    /// A body that takes no field (an empty object, or nothing).
    static let nothing = BodyFields(name: "", fields: [])

    func field(_ name: String) -> Field? { fields.first { $0.name == name } }

    /// Its schema, under its name among the document's components.
    var contract: ContractObject {
        ContractObject(name) { [self] c in
            OpenAPI.object(fields.map { ($0.name, $0.schema(c)) }, required: required, extra: extra(c))
        }
    }

    struct Field: Sendable {
        let name: String
        let kind: Kind
        let schema: @Sendable (Configuration) -> JSONValue

        enum Kind: Sendable {
            case string, boolean, strings
            /// A whole number in the range the configuration gives.
            case integer(@Sendable (Configuration) -> ClosedRange<Int>)
            /// Any JSON, which the route reads itself.
            case value
        }

        /// A string (or null, as `schema` says).
        static func string(_ name: String, _ schema: JSONValue) -> Field { Field(name: name, kind: .string) { _ in schema } }
        static func boolean(_ name: String, _ schema: JSONValue) -> Field { Field(name: name, kind: .boolean) { _ in schema } }
        static func strings(_ name: String, _ schema: JSONValue) -> Field { Field(name: name, kind: .strings) { _ in schema } }
        static func value(_ name: String, _ schema: JSONValue) -> Field { Field(name: name, kind: .value) { _ in schema } }

        /// A whole number or null, in `range`: the schema states the range.
        static func integer(_ name: String, _ range: @escaping @Sendable (Configuration) -> ClosedRange<Int>, description: String? = nil) -> Field {
            Field(name: name, kind: .integer(range)) { c in
                let r = range(c)
                var schema: [(String, JSONValue)] = [("type", ["integer", "null"]), ("minimum", .int(Int64(r.lowerBound))), ("maximum", .int(Int64(r.upperBound)))]
                if let description { schema.append(("description", .string(description))) }
                return .object(schema)
            }
        }
    }
}
