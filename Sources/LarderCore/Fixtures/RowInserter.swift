// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import SQLite

/// Inserts JSON rows, reusing one prepared statement per table and column list.
final class RowInserter {
    let db: Connection
    let item: FixtureLoader.Item
    var statements: [String: Statement] = [:]

    init(db: Connection, item: FixtureLoader.Item) {
        self.db = db
        self.item = item
    }

    func insert(table: String, row: JSONValue, position: String) throws {
        guard let members = row.objectMembers, !members.isEmpty else {
            throw FixtureLoader.failed(item, "\(position) must be a non-empty object of columns")
        }
        let columns = members.map(\.0)
        let key = table + "\u{0}" + columns.joined(separator: "\u{0}")
        do {
            let statement: Statement
            if let cached = statements[key] {
                statement = cached
                statement.reset()
            } else {
                statement = try db.prepare("INSERT INTO \(quoteIdentifier(table)) (\(columns.map(quoteIdentifier).joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))")
                statements[key] = statement
            }
            try statement.bind(members.map { RowInserter.sqliteValue($0.1) })
            while try statement.step() {}
        } catch let error as SQLiteError {
            throw LarderError.sqlite(error, as: .fixtureFailed, "fixture \(item.label) failed at \(position)",
                                     details: [("fixture", .string(item.label)), ("table", .string(table)), ("position", .string(position))])
        }
    }

    static func sqliteValue(_ value: JSONValue) -> SQLiteValue {
        switch value {
        case .null: return .null
        case .bool(let b): return .integer(b ? 1 : 0)
        case .int(let i): return .integer(i)
        case .double(let d): return .real(d)
        case .string(let s): return .text(s)
        case .array, .object:
            if let b64 = value["base64"]?.stringValue, value.objectMembers?.count == 1, let data = Data(base64Encoded: b64) {
                return .blob(Array(data))
            }
            return .text(value.jsonText)
        }
    }
}
