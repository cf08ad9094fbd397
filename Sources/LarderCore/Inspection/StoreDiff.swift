// SPDX-License-Identifier: Apache-2.0
import SQLite

/// What a test changed in a store: its schema and rows against its base
/// (the database it was created as). Runs on one connection with the store
/// as `main` and the base attached as `base`, inside one read transaction,
/// so the answer is one consistent state even while the test writes.
///
/// Rows are matched by key: the declared primary key (an `INTEGER PRIMARY
/// KEY` is the rowid), the `rowid` where none is declared, the key of a
/// `WITHOUT ROWID` table. SQLite compares the rows (two joins on the key
/// per table), so the cost grows with the tables' sizes, and only the
/// changed rows come back to Swift. Rows compare on the columns both sides
/// have: a column only one side has is a schema change, and its values show
/// in `old` or `new` of rows that changed otherwise. `tables` narrows the
/// rows, not the schema changes.
public enum StoreDiff {
    public struct Options: Sendable {
        /// Rows listed per table (the counts are always whole).
        public var limit = 100
        /// Only these tables (nil: every user table).
        public var tables: [String]?
        /// About how many bytes of row values the answer may hold in all.
        public var maxBytes = 64 * 1024 * 1024
        public init() {}
    }

    public struct TableChanges: Sendable {
        public var inserted: Int64 = 0
        public var updated: Int64 = 0
        public var deleted: Int64 = 0
        /// Up to `limit` rows: `{"op", "key", "old", "new"}`.
        public var rows: [JSONValue] = []
        public var total: Int64 { inserted + updated + deleted }

        /// Whether rows were left out (past `limit` or the byte budget).
        public var truncated: Bool { Int64(rows.count) < total }

        public var counts: JSONValue {
            ["inserted": .int(inserted), "updated": .int(updated), "deleted": .int(deleted)]
        }
    }

    public struct Changes: Sendable {
        public var schema: [SchemaChange]
        /// Changed tables only, by name.
        public var tables: [(String, TableChanges)]
    }

    /// A hardened connection to the database at `path` (a store's live
    /// file, or a copy of it) with `base` attached, read-only, as `base`;
    /// neither may be a symbolic link.
    public static func connect(_ path: String, base: String, busyTimeoutMs: Int) throws -> Connection {
        let db = try Connection(path: path, mode: .readWriteNoFollow, uri: true, busyTimeoutMs: Int32(clamping: busyTimeoutMs))
        try db.harden()
        do {
            try db.attachImmutable(path: base, as: "base")
        } catch let error as SQLiteError where error.isDamage {
            throw LarderError(.sqlError, "the store's base.sqlite is not a database (SQLite: \(error.message)): its test replaced it? "
                                  + "There is nothing to compare with, or to reset to; delete the store",
                              details: [("file", "base.sqlite"), ("sqlite_code", .int(Int64(error.code)))])
        }
        return db
    }

    /// The diff of `main` against the attached `base` on `db`.
    public static func compare(_ db: Connection, options: Options = Options()) throws -> Changes {
        try db.execute("BEGIN")
        defer { try? db.execute("COMMIT") }
        let schema = SchemaComparison.changes(from: try Inspector.schema(db, database: "base"), to: try Inspector.schema(db, database: "main"))
        let now = try shapes(db, "main"), was = try shapes(db, "base")
        var names = Set(now.keys).union(was.keys).sorted()
        if let wanted = options.tables {
            // SQLite's names are case-insensitive (ASCII), and so is the filter.
            let byName = Dictionary(names.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
            if let unknown = wanted.first(where: { byName[$0.lowercased()] == nil }) {
                throw LarderError.badRequest("no table '\(unknown)' in this store or its base", reason: .unknownTable,
                                  details: [("table", .string(unknown)), ("tables", JSONValue(names))])
            }
            let chosen = Set(wanted.compactMap { byName[$0.lowercased()] })
            names = names.filter(chosen.contains)
        }
        var budget = options.maxBytes
        var tables: [(String, TableChanges)] = []
        for name in names {
            let changes = try compare(db, now[name], was[name], limit: options.limit, budget: &budget)
            if changes.total > 0 { tables.append((name, changes)) }
        }
        return Changes(schema: schema, tables: tables)
    }

    /// A table as the diff sees it.
    struct Shape {
        var name: String
        var columns: [String]
        var key: Key
        /// How to name the rowid in SQL (nil when columns take all of
        /// `rowid`, `_rowid_` and `oid`, or for `WITHOUT ROWID`).
        var rowid: String?
        /// Columns that are bookkeeping, not data (Core Data's `Z_OPT`): a
        /// row whose only change is in them is no update.
        var bookkeeping: Set<String> = []

        /// The key as the answer names it, and as SQL reads it on the side `alias`.
        func key(_ alias: String) -> (names: [String], sql: [String]) {
            switch key {
            case .rowid(let shown): return ([shown], ["\(alias).\(rowid!)"])
            case .columns(let names): return (names, names.map { "\(alias).\(quoteIdentifier($0))" })
            }
        }

        /// SQL true when the side `alias` of an outer join has a row: its
        /// rowid, or a `WITHOUT ROWID` key column (never NULL), is there.
        func present(_ alias: String) -> String {
            rowid.map { "\(alias).\($0) IS NOT NULL" } ?? "\(alias).\(quoteIdentifier(key(alias).names[0])) IS NOT NULL"
        }

        /// How a scan names a row for its `Lookup`: the rowid, or (without
        /// one) nothing more, since the key columns are read anyway.
        func handle(_ alias: String) -> [String] { rowid.map { ["\(alias).\($0)"] } ?? [] }
    }

    enum Key: Equatable {
        /// The rowid, shown as this column (an `INTEGER PRIMARY KEY`) or as "rowid".
        case rowid(shownAs: String)
        /// Declared key columns.
        case columns([String])
    }

    /// The user tables of `database` (no `sqlite_*`, no bookkeeping, no
    /// virtual tables, whose shadow tables hold their rows).
    static func shapes(_ db: Connection, _ database: String) throws -> [String: Shape] {
        var out: [String: Shape] = [:]
        let bookkeeping = Inspector.bookkeepingTables
        let kinds: [(name: String, type: String, withoutRowid: Bool)] = try Inspector.tableKinds(db, database)
        for (name, type, withoutRowid) in kinds where type == "table" || type == "shadow" {
            guard !bookkeeping.contains(name) else { continue }
            let info = try db.rows("SELECT name, type, pk FROM pragma_table_info(?, ?) ORDER BY cid", [.text(name), .text(database)])
            let columns = info.compactMap { $0[0].string }
            let keyColumns = info.filter { ($0[2].int64 ?? 0) > 0 }.sorted { ($0[2].int64 ?? 0) < ($1[2].int64 ?? 0) }.compactMap { $0[0].string }
            let rowid = withoutRowid ? nil : ["rowid", "_rowid_", "oid"].first { alias in !columns.contains { $0.lowercased() == alias } }
            let key: Key
            if withoutRowid {
                key = .columns(keyColumns)
            } else if keyColumns.isEmpty, rowid != nil {
                key = .rowid(shownAs: "rowid")
            } else if keyColumns.count == 1, rowid != nil,
                      info.first(where: { $0[0].string == keyColumns[0] })?[1].string?.uppercased() == "INTEGER" {
                key = .rowid(shownAs: keyColumns[0])
            } else {
                key = .columns(keyColumns.isEmpty ? columns : keyColumns)
            }
            out[name] = Shape(name: name, columns: columns, key: key, rowid: rowid, bookkeeping: CoreData.bookkeepingColumns(columns))
        }
        return out
    }

    /// How the store's rows (`n`) meet the base's (`o`): by the store's key
    /// when the base has the same, else by rowid when both have one; nil
    /// when nothing can match.
    static func join(_ now: Shape, _ was: Shape) -> String? {
        switch (now.key, was.key) {
        case (.rowid, .rowid): return "n.\(now.rowid!) = o.\(was.rowid!)"
        case let (.columns(a), .columns(b)) where a == b:
            return a.map { "n.\(quoteIdentifier($0)) IS o.\(quoteIdentifier($0))" }.joined(separator: " AND ")
        default:
            guard let r = now.rowid, let s = was.rowid else { return nil }
            return "n.\(r) = o.\(s)"
        }
    }

    /// One table's two sides and how they are read: the scans select keys
    /// and rowids only; the listed rows' values come from each side's
    /// `Lookup`, prepared once for both passes.
    struct Sides {
        let now: Shape?, was: Shape?
        let newTable: String, oldTable: String
        let join: String?
        let lookNew: Lookup?, lookOld: Lookup?

        init(_ db: Connection, _ now: Shape?, _ was: Shape?, name: String) throws {
            self.now = now
            self.was = was
            let newTable = "main." + quoteIdentifier(name), oldTable = "base." + quoteIdentifier(name)
            self.newTable = newTable
            self.oldTable = oldTable
            join = now.flatMap { n in was.flatMap { StoreDiff.join(n, $0) } }
            lookNew = try now.map { try Lookup(db, newTable, $0) }
            lookOld = try was.map { try Lookup(db, oldTable, $0) }
        }

        /// Inserted and updated rows: the store's rows with no match in the
        /// base, or whose common columns differ. Selects whether the row
        /// matched, the key, the store's handle, then the base's. Without a
        /// match every row is new: they are counted apart, and only the rows
        /// listed are read.
        func changedRows(_ now: Shape, limit: Int) -> String {
            let selected = now.key("n").sql + now.handle("n")
            guard let was, let join else {
                return "SELECT " + (["0"] + selected).joined(separator: ", ") + " FROM \(newTable) AS n LIMIT \(limit)"
            }
            let differs = now.columns.filter { was.columns.contains($0) && !now.bookkeeping.contains($0) }.map { "n.\(quoteIdentifier($0)) IS NOT o.\(quoteIdentifier($0))" }
            var sql = "SELECT " + ([was.present("o")] + selected + was.handle("o")).joined(separator: ", ")
                + " FROM \(newTable) AS n LEFT JOIN \(oldTable) AS o ON \(join) WHERE NOT \(was.present("o"))"
            if !differs.isEmpty { sql += " OR " + balanced(differs, "OR") }
            return sql
        }

        /// Deleted rows: the base's rows with no match in the store. Selects
        /// the key, then the base's handle.
        func deletedRows(_ was: Shape, limit: Int) -> String {
            let sql = "SELECT " + (was.key("o").sql + was.handle("o")).joined(separator: ", ") + " FROM \(oldTable) AS o"
            guard let now, let join else { return sql + " LIMIT \(limit)" }
            return sql + " LEFT JOIN \(newTable) AS n ON \(join) WHERE NOT \(now.present("n"))"
        }
    }

    /// What one table's diff lists: rows until `limit`, or until one does
    /// not fit what is left of the byte budget (its column names and
    /// escapes counted), which ends the listing.
    struct Listing {
        var changes = TableChanges()
        var budget: Int
        let limit: Int

        var isOpen: Bool { changes.rows.count < limit && budget > 0 }

        mutating func close() { budget = 0 }

        mutating func list(_ row: JSONValue) {
            let size = QueryRunner.encodedSize(row)
            guard size <= budget else { return close() }
            budget -= size
            changes.rows.append(row)
        }

        mutating func list(_ op: String, key names: [String], _ keys: [SQLiteValue], old: JSONValue, new: JSONValue) {
            list(.object([("op", .string(op)), ("key", .object(zip(names, keys).map { ($0, QueryRunner.json($1)) })), ("old", old), ("new", new)]))
        }
    }

    /// The changes of one table, present in the store (`now`), the base
    /// (`was`) or both.
    static func compare(_ db: Connection, _ now: Shape?, _ was: Shape?, limit: Int, budget: inout Int) throws -> TableChanges {
        guard let name = now?.name ?? was?.name else { return TableChanges() }
        let sides = try Sides(db, now, was, name: name)
        var listing = Listing(budget: budget, limit: limit)
        defer { budget = listing.budget }
        if let now, let lookNew = sides.lookNew {
            let statement = try db.prepare(sides.changedRows(now, limit: limit))
            let key = now.key("n").names
            let keyStart = 1, handleStart = keyStart + key.count
            while try statement.step() {
                let matched = statement.int64(0) != 0
                if matched { listing.changes.updated += 1 } else { listing.changes.inserted += 1 }
                // Counted apart when nothing matches: no need to read on.
                guard listing.isOpen else { if sides.join == nil { break } else { continue } }
                let keys = (keyStart..<handleStart).map { statement.column($0) }
                let newHandle = now.rowid == nil ? keys : [statement.column(handleStart)]
                let oldHandle = was?.rowid == nil ? keys : [statement.column(now.rowid == nil ? handleStart : handleStart + 1)]
                guard let new = try lookNew.object(newHandle, budget: listing.budget) else { listing.close(); continue }
                var old: JSONValue = .null
                if matched, let lookOld = sides.lookOld {
                    guard let found = try lookOld.object(oldHandle, budget: listing.budget - new.size) else { listing.close(); continue }
                    old = found.object
                }
                listing.list(matched ? "update" : "insert", key: key, keys, old: old, new: new.object)
            }
            if sides.join == nil { listing.changes.inserted = try count(db, sides.newTable) }
        }
        if let was, let lookOld = sides.lookOld {
            let statement = try db.prepare(sides.deletedRows(was, limit: limit))
            let key = was.key("o").names
            while try statement.step() {
                listing.changes.deleted += 1
                guard listing.isOpen else { if sides.join == nil { break } else { continue } }
                let keys = (0..<key.count).map { statement.column($0) }
                guard let old = try lookOld.object(was.rowid == nil ? keys : [statement.column(key.count)], budget: listing.budget) else {
                    listing.close(); continue
                }
                listing.list("delete", key: key, keys, old: old.object, new: .null)
            }
            if sides.join == nil { listing.changes.deleted = try count(db, sides.oldTable) }
        }
        return listing.changes
    }

    /// `terms` joined by `op` as a balanced tree: SQLite limits an
    /// expression's depth to 1,000, and a chain of 998 `OR`s is that deep.
    static func balanced(_ terms: [String], _ op: String) -> String {
        if terms.count <= 8 { return "(" + terms.joined(separator: " \(op) ") + ")" }
        let half = terms.count / 2
        return "(" + balanced(Array(terms[..<half]), op) + " \(op) " + balanced(Array(terms[half...]), op) + ")"
    }

    /// Reads one side's rows, each by its rowid or (without one) its key.
    /// A table may have 2,000 columns, and a SELECT of both sides' columns
    /// would pass SQLite's limit on a result's columns, so the columns are
    /// read at most `batch` a statement.
    struct Lookup {
        static let batch = 500
        let parts: [(names: ArraySlice<String>, statement: Statement)]

        init(_ db: Connection, _ table: String, _ shape: Shape) throws {
            let by: [String]
            if let rowid = shape.rowid {
                by = [rowid]
            } else if case .columns(let names) = shape.key {
                by = names.map(quoteIdentifier)
            } else {
                by = []
            }
            let condition = by.enumerated().map { "\($1) IS ?\($0 + 1)" }.joined(separator: " AND ")
            parts = try stride(from: 0, to: shape.columns.count, by: Lookup.batch).map { start in
                let names = shape.columns[start..<min(start + Lookup.batch, shape.columns.count)]
                let sql = "SELECT " + names.map(quoteIdentifier).joined(separator: ", ") + " FROM \(table) WHERE \(condition) LIMIT 1"
                return (names, try db.prepare(sql))
            }
        }

        /// The row named by `handle` as an object of every column, with
        /// about how many bytes it takes as JSON; nil when it would pass
        /// `budget` (or is not there).
        func object(_ handle: [SQLiteValue], budget: Int) throws -> (object: JSONValue, size: Int)? {
            var members: [(String, JSONValue)] = []
            var size = 2
            for (names, statement) in parts {
                statement.reset()
                try statement.bind(handle)
                guard try statement.step() else { return nil }
                // A first guess from the values' lengths, before copying any.
                size += rowSize(statement, from: 0, to: names.count)
                guard size <= budget else { return nil }
                for (i, name) in names.enumerated() { members.append((name, QueryRunner.json(statement.column(i)))) }
            }
            return (.object(members), size)
        }
    }

    /// The rows of a whole table (no payload read).
    static func count(_ db: Connection, _ table: String) throws -> Int64 {
        try db.scalar("SELECT count(*) FROM \(table)")?.int64 ?? 0
    }

    /// About how many bytes columns `from..<to` take as JSON, known before any is copied.
    static func rowSize(_ statement: Statement, from: Int, to: Int) -> Int {
        (from..<to).reduce(64) { $0 + QueryRunner.encodedSize(statement, $1) + 16 }
    }
}
