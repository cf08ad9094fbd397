// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A JSON value: query parameters and results, inline fixture rows, error
/// details, diffs. Write it with literals:
///
///     try await store.query("SELECT * FROM artists WHERE born > ? AND name <> ?", parameters: [1900, nil])
///     try await store.load(rows: ["artists": [["id": 5, "name": "Sonia Delaunay", "born": 1885]]])
///
/// Integers stay integers (`Int64`), so ids and counts survive the trip
/// exactly. A BLOB is the object `{"base64": "..."}` both ways: see
/// ``blob(_:)`` and ``dataValue``.
public enum LarderValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([LarderValue])
    case object([String: LarderValue])

    /// A BLOB, as the server reads and writes it: `{"base64": "..."}`.
    public static func blob(_ data: Data) -> LarderValue {
        .object(["base64": .string(data.base64EncodedString())])
    }

    public var isNull: Bool { self == .null }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var arrayValue: [LarderValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: [String: LarderValue]? { if case .object(let o) = self { return o } else { return nil } }

    /// The integer, also from a double with no fraction.
    public var int64Value: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }

    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }

    /// The number, from an integer too.
    public var doubleValue: Double? {
        switch self {
        case .double(let d): return d
        case .int(let i): return Double(i)
        default: return nil
        }
    }

    /// The bytes of a BLOB (`{"base64": "..."}`).
    public var dataValue: Data? {
        guard case .object(let o) = self, o.count == 1, let text = o["base64"]?.stringValue else { return nil }
        return Data(base64Encoded: text)
    }

    /// A member of an object (nil for anything else or a missing key).
    public subscript(key: String) -> LarderValue? { objectValue?[key] }

    /// An element of an array (nil out of range or for anything else).
    public subscript(index: Int) -> LarderValue? {
        guard case .array(let a) = self, a.indices.contains(index) else { return nil }
        return a[index]
    }
}

extension LarderValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? container.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? container.decode(Double.self) {
            self = .double(d)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let a = try? container.decode([LarderValue].self) {
            self = .array(a)
        } else {
            self = .object(try container.decode([String: LarderValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .int(let i): try container.encode(i)
        case .double(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}

extension LarderValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: LarderValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, LarderValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension LarderValue {
    /// From Swift values: `nil`, `Bool`, any integer, `Float`/`Double`,
    /// `String`, `Data` (a BLOB), `Date` (RFC 3339 text), arrays and
    /// `[String: Any]` of these, or a `LarderValue`. Anything else is nil.
    public init?(_ any: Any?) {
        guard let any else { self = .null; return }
        // An `Optional` wrapped in `Any` (an `[Any?]` inside an `Any`) unwraps here.
        let mirror = Mirror(reflecting: any)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { self = .null; return }
            self.init(wrapped)
            return
        }
        switch any {
        case let v as LarderValue: self = v
        case let v as any BinaryInteger:
            guard let i = Int64(exactly: v) else { return nil }
            self = .int(i)
        case let v as Double: self = .double(v)
        case let v as Float: self = .double(Double(v))
        case let v as Bool: self = .bool(v)
        case let v as String: self = .string(v)
        case let v as Substring: self = .string(String(v))
        case let v as Data: self = .blob(v)
        case let v as Date: self = .string(v.formatted(.iso8601))
        case let v as [Any?]:
            var out: [LarderValue] = []
            for element in v {
                guard let value = LarderValue(element) else { return nil }
                out.append(value)
            }
            self = .array(out)
        case let v as [String: Any?]:
            var out: [String: LarderValue] = [:]
            for (key, element) in v {
                guard let value = LarderValue(element) else { return nil }
                out[key] = value
            }
            self = .object(out)
        default: return nil
        }
    }
}

extension LarderValue: CustomStringConvertible {
    /// Compact JSON (keys sorted; a non-finite double, which JSON cannot
    /// carry, prints as Swift does).
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d): return "\(d)"
        case .string(let s): return LarderValue.quoted(s)
        case .array(let a): return "[" + a.map { $0.description }.joined(separator: ",") + "]"
        case .object(let o):
            return "{" + o.sorted { $0.key < $1.key }.map { LarderValue.quoted($0.key) + ":" + $0.value.description }.joined(separator: ",") + "}"
        }
    }

    private static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
