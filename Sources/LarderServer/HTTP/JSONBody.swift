// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// A request's JSON object body, checked against the fields a route knows:
/// unknown fields and wrong types are 400s that name the field.
struct JSONBody {
    let members: [(String, JSONValue)]

    init(_ request: Request, allowed: Set<String>) throws {
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
        guard let value = value(key), !value.isNull else { return nil }
        guard let s = value.stringValue else { throw wrongType(key, "a string", value) }
        return s
    }

    func int(_ key: String, in range: ClosedRange<Int>? = nil) throws -> Int? {
        guard let value = value(key), !value.isNull else { return nil }
        guard let v = value.intValue, let i = Int(exactly: v) else { throw wrongType(key, "a whole number", value) }
        if let range, !range.contains(i) {
            throw LarderError(.badRequest, "field '\(key)' must be in \(range.lowerBound)...\(range.upperBound), not \(i)",
                              details: [("field", .string(key))])
        }
        return i
    }

    func bool(_ key: String) throws -> Bool? {
        guard let value = value(key), !value.isNull else { return nil }
        guard let b = value.boolValue else { throw wrongType(key, "true or false", value) }
        return b
    }

    func stringArray(_ key: String) throws -> [String]? {
        guard let value = value(key), !value.isNull else { return nil }
        guard let items = value.arrayValue else { throw wrongType(key, "an array of strings", value) }
        return try items.map { item in
            guard let s = item.stringValue else { throw wrongType(key, "an array of strings", value) }
            return s
        }
    }
}
