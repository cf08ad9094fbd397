// SPDX-License-Identifier: Apache-2.0
import SQLite

/// "Keep its data", checked without a word written by the team: every table
/// of the database before migrating that held rows still exists with at
/// least as many, and every column that held non-NULL values still exists
/// with at least as many, unless the expectations declare that a migration
/// drops (`drops`), moves (`moves`, checked: the values arrived) or deletes
/// (`deletes`) them on purpose. Runs on a connection to the migrated
/// database with the database as it was before attached as `base`.
public struct DataKept: Sendable {
    /// A table, or one of its columns, as `.expect.json` names it (`"t"`, `"t.c"`).
    struct Place: Hashable, CustomStringConvertible {
        var table: String
        var column: String?
        init(_ text: String) {
            if let dot = text.firstIndex(of: ".") {
                table = String(text[..<dot]).lowercased()
                column = String(text[text.index(after: dot)...]).lowercased()
            } else {
                table = text.lowercased()
            }
        }
        var description: String { column.map { "\(table).\($0)" } ?? table }
    }

    var drops: Set<Place> = []
    var moves: [Place: Place] = [:]
    /// Rows a migration may delete, per table; nil: any number (`"*"`).
    var deletes: [String: Int64?] = [:]

    /// Reads `drops`, `moves` and `deletes` of an `.expect.json`; a malformed
    /// one is a failure named in `problems`.
    public init(expect: JSONValue?, problems: inout [String]) {
        guard let expect else { return }
        for item in expect["drops"]?.arrayValue ?? [] {
            guard let text = item.stringValue, !text.isEmpty else { problems.append("drops in expect.json must be \"table\" or \"table.column\" strings"); continue }
            drops.insert(Place(text))
        }
        for (from, to) in expect["moves"]?.objectMembers ?? [] {
            guard let text = to.stringValue, case let target = Place(text), (target.column == nil) == (Place(from).column == nil) else {
                problems.append("moves.\(from) in expect.json must name a \(Place(from).column == nil ? "table" : "table.column") to move to")
                continue
            }
            moves[Place(from)] = target
        }
        for (table, value) in expect["deletes"]?.objectMembers ?? [] {
            if value.stringValue == "*" { deletes[table.lowercased()] = .some(nil) }
            else if let n = value.intValue, n >= 0 { deletes[table.lowercased()] = .some(Int64(n)) }
            else { problems.append("deletes.\(table) in expect.json must be \"*\" or a number of rows") }
        }
    }

    /// Each table's rows and each column's non-NULL values in `database`.
    struct Census {
        var rows: Int64
        /// Column (as written) → non-NULL values, in table order.
        var columns: [(name: String, values: Int64)]
    }

    /// Plain tables of `database` (no views, virtual tables or their shadows,
    /// no `sqlite_*`, no migration bookkeeping), lower-cased name → name.
    static func tables(_ db: Connection, _ database: String) throws -> [String: String] {
        var out: [String: String] = [:]
        let bookkeeping = Inspector.bookkeepingTables
        for (name, type, _) in try Inspector.tableKinds(db, database) where type == "table" {
            guard !bookkeeping.contains(name) else { continue }
            out[name.lowercased()] = name
        }
        return out
    }

    static func census(_ db: Connection, _ database: String, _ table: String) throws -> Census {
        let all = try db.rows("SELECT name FROM pragma_table_info(?, ?) ORDER BY cid", [.text(table), .text(database)]).compactMap { $0[0].string }
        let bookkeeping = CoreData.bookkeepingColumns(all)
        let columns = all.filter { !bookkeeping.contains($0) }
        let counts = (["count(*)"] + columns.map { "count(\(quoteIdentifier($0)))" }).joined(separator: ", ")
        let row = try db.rows("SELECT \(counts) FROM \(quoteIdentifier(database)).\(quoteIdentifier(table))").first ?? []
        let numbers = row.map { $0.int64 ?? 0 }
        return Census(rows: numbers.first ?? 0, columns: zip(columns, numbers.dropFirst()).map { ($0, $1) })
    }

    /// What was lost, in sentences naming the table and column and what was there.
    public func failures(_ db: Connection, base: String = "base") throws -> [String] {
        var out: [String] = []
        let before = try DataKept.tables(db, base), after = try DataKept.tables(db, "main")
        var afterCensus: [String: Census] = [:]
        func now(_ key: String) throws -> Census? {
            guard let name = after[key] else { return nil }
            if let known = afterCensus[key] { return known }
            let census = try DataKept.census(db, "main", name)
            afterCensus[key] = census
            return census
        }
        for key in before.keys.sorted() {
            let name = before[key]!
            let was = try DataKept.census(db, base, name)
            guard was.rows > 0, !drops.contains(Place(key)) else { continue }
            if let target = moves[Place(key)] {
                guard let moved = try now(target.table) else {
                    out.append("table \(name) held \(was.rows) rows, declared moved to \(target.table); the migrated store has no table \(target.table)")
                    continue
                }
                if moved.rows < was.rows { out.append("table \(name) held \(was.rows) rows, declared moved to \(target.table), which has \(moved.rows)") }
                continue
            }
            let deletable = deletes[key]
            guard let census = try now(key) else {
                out.append("table \(name) held \(was.rows) rows; the migrated store has no table \(name)")
                continue
            }
            switch deletable {
            case .none where census.rows < was.rows:
                out.append("table \(name) held \(was.rows) rows; the migrated store has \(census.rows)")
            case .some(.some(let allowed)) where census.rows < was.rows - allowed:
                out.append("table \(name) held \(was.rows) rows, of which \(allowed) may be deleted; the migrated store has \(census.rows)")
            default: break
            }
            let nowColumns = Dictionary(census.columns.map { ($0.name.lowercased(), $0.values) }, uniquingKeysWith: { a, _ in a })
            for (column, values) in was.columns where values > 0 {
                let place = Place("\(key).\(column)")
                if drops.contains(place) { continue }
                if let target = moves[place] {
                    out += try arrived(db, base: base, from: (name, column), values: values, to: target, after: after)
                    continue
                }
                guard let found = nowColumns[column.lowercased()] else {
                    out.append("\(name).\(column) held \(values) non-NULL values; the migrated store has no column \(column)")
                    continue
                }
                // Where rows went, their values went with them: the table's line says it.
                if found < values && deletable == nil && census.rows >= was.rows {
                    out.append("\(name).\(column) held \(values) non-NULL values; the migrated store has \(found)")
                }
            }
        }
        return out
    }

    /// A declared column move: every distinct non-NULL value of the column
    /// before is among the target column's values after.
    func arrived(_ db: Connection, base: String, from: (table: String, column: String), values: Int64, to target: Place,
                 after: [String: String]) throws -> [String] {
        let what = "\(from.table).\(from.column) held \(values) non-NULL values, declared moved to \(target)"
        guard let table = after[target.table], let targetColumn = target.column else { return ["\(what); the migrated store has no table \(target.table)"] }
        let columns = try db.rows("SELECT name FROM pragma_table_info(?, 'main')", [.text(table)]).compactMap { $0[0].string }
        guard let column = columns.first(where: { $0.lowercased() == targetColumn }) else {
            return ["\(what); the migrated store has no column \(table).\(targetColumn)"]
        }
        let missing = try db.rows("""
            SELECT count(*), min(v) FROM (SELECT DISTINCT \(quoteIdentifier(from.column)) AS v FROM \(quoteIdentifier(base)).\(quoteIdentifier(from.table))
                WHERE v IS NOT NULL EXCEPT SELECT \(quoteIdentifier(column)) FROM main.\(quoteIdentifier(table)))
            """).first
        guard let count = missing?[0].int64, count > 0 else { return [] }
        let example = missing.map { QueryRunner.json($0[1]).jsonText.prefix(80) } ?? ""
        return ["\(what); \(count) of its distinct values did not arrive (such as \(example))"]
    }
}
