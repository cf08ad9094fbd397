// SPDX-License-Identifier: Apache-2.0
/// One structural difference between two `Inspector.schema` descriptions:
/// a table, column, index, view or trigger added, removed or changed, or a
/// table's foreign keys changed. `old` and `new` are the definitions on
/// each side (absent on the side that lacks it).
public struct SchemaChange: Sendable, Equatable {
    public enum Kind: String, Sendable { case added, removed, changed }
    public var kind: Kind
    /// "table", "column", "index", "foreign_keys", "view" or "trigger".
    public var type: String
    public var name: String
    /// The table a column, index or foreign key belongs to.
    public var table: String?
    public var old: JSONValue?
    public var new: JSONValue?

    /// The fields of a column and of an index that count; the rest (an
    /// index's origin) may differ between two equal schemas.
    static let columnFields = ["type", "notnull", "default", "pk"]
    static let indexFields = ["unique", "columns", "partial"]
}

/// Compares two `Inspector.schema` descriptions structurally: by name, the
/// columns' type, nullability, default and key, the indexes' columns,
/// uniqueness and partiality, the foreign keys, and the SQL of views and
/// triggers (ignoring case and spacing).
public enum SchemaComparison {
    /// What changed from `old` to `new`: missing tables first, then new
    /// ones, then each common table's columns, indexes and foreign keys,
    /// then views and triggers.
    public static func changes(from old: JSONValue, to new: JSONValue) -> [SchemaChange] {
        var out: [SchemaChange] = []
        func byName(_ list: JSONValue?) -> [String: JSONValue] {
            Dictionary((list?.arrayValue ?? []).compactMap { item in item["name"]?.stringValue.map { ($0, item) } }, uniquingKeysWith: { a, _ in a })
        }
        /// Removed, added and changed members of two lists by name.
        func compare(_ was: JSONValue?, _ now: JSONValue?, type: String, table: String?, differ: (JSONValue, JSONValue) -> Bool) {
            let a = byName(was), b = byName(now)
            for name in a.keys.sorted() where b[name] == nil { out.append(SchemaChange(kind: .removed, type: type, name: name, table: table, old: a[name])) }
            for name in b.keys.sorted() where a[name] == nil { out.append(SchemaChange(kind: .added, type: type, name: name, table: table, new: b[name])) }
            for name in a.keys.sorted() {
                guard let x = a[name], let y = b[name], differ(x, y) else { continue }
                out.append(SchemaChange(kind: .changed, type: type, name: name, table: table, old: x, new: y))
            }
        }
        func fields(_ names: [String]) -> (JSONValue, JSONValue) -> Bool {
            { x, y in names.contains { x[$0] != y[$0] } }
        }
        let was = byName(old["tables"]), now = byName(new["tables"])
        compare(old["tables"], new["tables"], type: "table", table: nil) { _, _ in false }
        for name in was.keys.sorted() {
            guard let w = was[name], let n = now[name] else { continue }
            compare(w["columns"], n["columns"], type: "column", table: name, differ: fields(SchemaChange.columnFields))
            compare(w["indexes"], n["indexes"], type: "index", table: name, differ: fields(SchemaChange.indexFields))
            if w["foreign_keys"] != n["foreign_keys"] {
                out.append(SchemaChange(kind: .changed, type: "foreign_keys", name: name, table: name,
                                        old: w["foreign_keys"] ?? .array([]), new: n["foreign_keys"] ?? .array([])))
            }
        }
        for kind in ["views", "triggers"] {
            compare(old[kind], new[kind], type: String(kind.dropLast()), table: nil) { x, y in
                guard let a = x["sql"]?.stringValue, let b = y["sql"]?.stringValue else { return false }
                return normalizeSQL(a) != normalizeSQL(b)
            }
        }
        return out
    }

    /// The changes from a fresh build (`expected`) to what was `found`, as
    /// sentences naming the table and column; `reference` names what was
    /// expected in them ("a fresh build", "the reference").
    public static func differences(expected: JSONValue, found: JSONValue, reference: String = "a fresh build") -> [String] {
        changes(from: expected, to: found).flatMap { c -> [String] in
            let thing = c.type == "column" ? "column \(c.table ?? "").\(c.name)"
                : c.type == "index" ? "index \(c.name) on \(c.table ?? "")" : "\(c.type) \(c.name)"
            switch c.kind {
            case .removed: return ["\(thing) is missing"]
            case .added: return ["\(thing) is not in \(reference)"]
            case .changed:
                let a = c.old ?? .null, b = c.new ?? .null
                switch c.type {
                case "column", "index":
                    return (c.type == "column" ? SchemaChange.columnFields : SchemaChange.indexFields).filter { a[$0] != b[$0] }.map {
                        "\(thing): \($0) is \(b[$0]?.jsonText ?? "null"), \(reference) has \(a[$0]?.jsonText ?? "null")"
                    }
                case "foreign_keys":
                    return ["foreign keys of \(c.name) are \(b.jsonText), \(reference) has \(a.jsonText)"]
                default:
                    return ["\(thing) has different SQL from \(reference)"]
                }
            }
        }
    }

    static func normalizeSQL(_ sql: String) -> String {
        sql.lowercased().split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }).joined(separator: " ")
    }
}
