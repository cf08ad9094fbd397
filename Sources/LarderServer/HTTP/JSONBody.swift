// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// A request's JSON object body, read by its description (`BodyFields`):
/// unknown fields, wrong types and numbers out of range are 400s that name
/// the field.
struct JSONBody {
    let members: [(String, JSONValue)]
    private let description: BodyFields
    private let configuration: Configuration

    init(_ request: Request, _ description: BodyFields, _ configuration: Configuration) throws {
        self.description = description
        self.configuration = configuration
        let allowed = description.names
        guard request.hasBody else {
            members = []
            return
        }
        let bytes = try request.bodyBytes()
        let parsed = Result { try JSONValue.parse(bytes) }
        if let type = request.mediaType, type != "application/json", !type.hasSuffix("+json") {
            // curl -d sends form encoding by default; take it when the body is JSON.
            let lenient = type == "application/x-www-form-urlencoded" && (try? parsed.get()) != nil
            if !lenient {
                throw LarderError(.unsupportedMediaType, "send JSON (Content-Type: application/json), not \(type)",
                                  details: [("content_type", .string(type))])
            }
        }
        let value: JSONValue
        do {
            value = try parsed.get()
        } catch let error as JSONValue.ParseError {
            throw LarderError(.badRequest, "malformed JSON: \(error)", details: [("offset", .int(Int64(error.offset)))])
        }
        guard let members = value.objectMembers else {
            throw LarderError.badRequest("the body must be a JSON object, not \(value.typeName)")
        }
        if let unknown = members.first(where: { !allowed.contains($0.0) }) {
            throw LarderError(.badRequest, "unknown field '\(unknown.0)'; known fields: \(allowed.sorted().joined(separator: ", "))",
                              details: [("field", .string(unknown.0))])
        }
        self.members = members
    }

    func has(_ key: String) -> Bool { members.contains { $0.0 == key } }

    func value(_ key: String) -> JSONValue? {
        members.first(where: { $0.0 == key })?.1
    }

    private func wrongType(_ key: String, _ expected: String, _ value: JSONValue) -> LarderError {
        LarderError(.badRequest, "field '\(key)' must be \(expected), not \(value.typeName)", details: [("field", .string(key))])
    }

    /// A string, or nil when absent or null.
    func string(_ key: String) throws -> String? {
        guard case .string = declared(key) else { preconditionFailure("\(description.name).\(key) is not a string") }
        guard let value = value(key), !value.isNull else { return nil }
        guard let s = value.stringValue else { throw wrongType(key, "a string", value) }
        return s
    }

    /// The field as its description declares it (a route reading a field it does not declare is a mistake of the route's).
    private func declared(_ key: String) -> BodyFields.Field.Kind {
        guard let field = description.field(key) else { preconditionFailure("\(description.name) declares no field '\(key)'") }
        return field.kind
    }

    /// A whole number within the range its description gives, or nil when absent or null.
    func int(_ key: String) throws -> Int? {
        guard case .integer(let limits) = declared(key) else { preconditionFailure("\(description.name).\(key) is not a number") }
        let range = limits(configuration)
        guard let value = value(key), !value.isNull else { return nil }
        guard let v = value.intValue, let i = Int(exactly: v) else { throw wrongType(key, "a whole number", value) }
        if !range.contains(i) {
            throw LarderError(.badRequest, "field '\(key)' must be in \(range.lowerBound)...\(range.upperBound), not \(i)",
                              details: [("field", .string(key))])
        }
        return i
    }

    func bool(_ key: String) throws -> Bool? {
        guard case .boolean = declared(key) else { preconditionFailure("\(description.name).\(key) is not a boolean") }
        guard let value = value(key), !value.isNull else { return nil }
        guard let b = value.boolValue else { throw wrongType(key, "true or false", value) }
        return b
    }

    func stringArray(_ key: String) throws -> [String]? {
        guard case .strings = declared(key) else { preconditionFailure("\(description.name).\(key) is not a list of strings") }
        guard let value = value(key), !value.isNull else { return nil }
        guard let items = value.arrayValue else { throw wrongType(key, "an array of strings", value) }
        return try items.map { item in
            guard let s = item.stringValue else { throw wrongType(key, "an array of strings", value) }
            return s
        }
    }
}
