// SPDX-License-Identifier: Apache-2.0
import SQLite

extension Inspector {
    /// A value as people see it on a page: long text and BLOBs are not
    /// copied whole, only their size is read.
    public enum Cell: Sendable, Equatable {
        case null
        case blob(bytes: Int)
        /// Text up to the preview's cut, and its whole size in bytes.
        case text(String, bytes: Int)
        /// A number.
        case number(JSONValue)
    }

    /// A page of one table's rows.
    public struct Preview: Sendable {
        public var table: String
        public var columns: [String]
        public var rows: [[Cell]]
    }

    /// Every user table's row count, and a page of rows of each of the
    /// first `tables` of them: `rows` rows from `offset` for `chosen`, from
    /// the start for the others; text cut at `textBytes` bytes. A `chosen`
    /// table the store does not have is a bad request.
    public static func preview(_ db: Connection, tables: Int, rows: Int, chosen: String?, offset: Int,
                               textBytes: Int) throws -> (counts: [(String, Int64)], previews: [Preview]) {
        let counts = try Inspector.counts(db)
        if let chosen, !counts.contains(where: { $0.0 == chosen }) {
            throw LarderError.badRequest("no table '\(chosen)' in this store", reason: .unknownTable, details: [("table", .string(chosen))])
        }
        let previews = try counts.prefix(tables).map { name, _ in
            let skip = name == chosen ? offset : 0
            let statement = try db.prepare("SELECT * FROM \(quoteIdentifier(name)) LIMIT \(rows) OFFSET \(skip)")
            var page: [[Cell]] = []
            while try statement.step() { page.append((0..<statement.columnCount).map { cell(statement, $0, textBytes: textBytes) }) }
            return Preview(table: name, columns: statement.columnNames, rows: page)
        }
        return (counts, previews)
    }

    static func cell(_ statement: Statement, _ i: Int, textBytes: Int) -> Cell {
        switch statement.columnType(i) {
        case .null: return .null
        case .blob: return .blob(bytes: statement.columnByteCount(i))
        case .text: return .text(statement.textPrefix(i, maxBytes: textBytes), bytes: statement.columnByteCount(i))
        default: return .number(QueryRunner.json(statement.column(i)))
        }
    }
}
