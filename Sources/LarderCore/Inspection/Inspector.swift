// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import SQLite

/// Reads what is inside a store: row counts and the schema. Works on any
/// connection; never writes.
public enum Inspector {
    /// Tables that migration tools keep for their own bookkeeping; never counted.
    public static var bookkeepingTables: Set<String> { Bookkeeping.tables }

    /// User tables, in name order: no `sqlite_*`, no bookkeeping, no virtual-table shadows.
    public static func userTables(_ db: Connection) throws -> [String] {
        let statement = try db.cached("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        defer { statement.reset() }
        let bookkeeping = bookkeepingTables
        var names: [String] = []
        while try statement.step() {
            if let name = statement.string(0), !bookkeeping.contains(name) { names.append(name) }
        }
        return names
    }

    /// Row counts of `tables` (default: every user table). An unknown table is a bad request.
    public static func counts(_ db: Connection, tables: [String]? = nil) throws -> [(String, Int64)] {
        let all = try userTables(db)
        var names = all
        if let tables {
            // Bookkeeping tables are left out of every count but those that name them.
            let known = Set(all), bookkeeping = bookkeepingTables
            if let unknown = try tables.first(where: { try !known.contains($0) && !(bookkeeping.contains($0) && Bookkeeping.tableExists(db, $0)) }) {
                throw LarderError.badRequest("no table '\(unknown)' in this store (counts leave out sqlite_ tables, and migration bookkeeping unless named)", reason: .unknownTable,
                                  details: [("table", .string(unknown)), ("tables", JSONValue(all))])
            }
            names = tables
        }
        return try names.map { name in
            let statement = try db.cached("SELECT count(*) FROM \(quoteIdentifier(name))")
            defer { statement.reset() }
            return (name, try statement.step() ? statement.int64(0) : 0)
        }
    }
}

/// `"name"` with embedded quotes doubled: safe to put in SQL text.
public func quoteIdentifier(_ name: String) -> String {
    "\"" + name.replacing("\"", with: "\"\"") + "\""
}
