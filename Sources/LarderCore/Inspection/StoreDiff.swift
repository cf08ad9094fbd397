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

        public var counts: JSONValue {
            ["inserted": .int(inserted), "updated": .int(updated), "deleted": .int(deleted)]
        }
        public var json: JSONValue {
            .object([("inserted", .int(inserted)), ("updated", .int(updated)), ("deleted", .int(deleted)),
                     ("rows", .array(rows)), ("truncated", .bool(Int64(rows.count) < total))])
        }
    }

    public struct Changes: Sendable {
        public var schema: [SchemaChange]
        /// Changed tables only, by name.
        public var tables: [(String, TableChanges)]

        /// `GET /stores/{id}/diff`'s answer; `base` says what the store was created as.
        public func json(base: String) -> JSONValue {
            func list(_ kind: SchemaChange.Kind) -> JSONValue { .array(schema.filter { $0.kind == kind }.map(\.json)) }
            return .object([
                ("base", .string(base)),
                ("schema", .object([("added", list(.added)), ("removed", list(.removed)), ("changed", list(.changed))])),
                ("tables", .object(tables.map { ($0.0, $0.1.json) })),
            ])
        }
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
        let list = try db.rows("SELECT name, type, wr FROM pragma_table_list WHERE schema = ? AND type IN ('table', 'shadow') "
                               + "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'", [.text(database)])
        let bookkeeping = Inspector.bookkeepingTables
        for row in list {
            guard let name = row[0].string, !bookkeeping.contains(name) else { continue }
            let info = try db.rows("SELECT name, type, pk FROM pragma_table_info(?, ?) ORDER BY cid", [.text(name), .text(database)])
            let columns = info.compactMap { $0[0].string }
            let keyColumns = info.filter { ($0[2].int64 ?? 0) > 0 }.sorted { ($0[2].int64 ?? 0) < ($1[2].int64 ?? 0) }.compactMap { $0[0].string }
            let withoutRowid = row[2].isTrue
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
            out[name] = Shape(name: name, columns: columns, key: key, rowid: rowid)
        }
        return out
    }

    /// The changes of one table, present in the store (`now`), the base
    /// (`was`) or both.
    static func compare(_ db: Connection, _ now: Shape?, _ was: Shape?, limit: Int, budget: inout Int) throws -> TableChanges {
        var changes = TableChanges()
        guard let table = now?.name ?? was?.name else { return changes }
        let newTable = "main." + quoteIdentifier(table), oldTable = "base." + quoteIdentifier(table)
        // How rows are matched: by the store's key when the base has the
        // same, else by rowid when both have one; else nothing matches.
        var join: String?
        if let now, let was {
            switch (now.key, was.key) {
            case (.rowid, .rowid): join = "n.\(now.rowid!) = o.\(was.rowid!)"
            case let (.columns(a), .columns(b)) where a == b:
                join = a.map { "n.\(quoteIdentifier($0)) IS o.\(quoteIdentifier($0))" }.joined(separator: " AND ")
            default:
                if let r = now.rowid, let s = was.rowid { join = "n.\(r) = o.\(s)" }
            }
        }
        func keyColumns(_ shape: Shape, _ alias: String) -> (names: [String], sql: [String]) {
            switch shape.key {
            case .rowid(let shown): return ([shown], ["\(alias).\(shape.rowid!)"])
            case .columns(let names): return (names, names.map { "\(alias).\(quoteIdentifier($0))" })
            }
        }
        /// A row present on a side: a rowid, or a `WITHOUT ROWID` key column (never NULL).
        func present(_ shape: Shape, _ alias: String) -> String {
            shape.rowid.map { "\(alias).\($0) IS NOT NULL" } ?? "\(alias).\(quoteIdentifier(keyColumns(shape, alias).names[0])) IS NOT NULL"
        }
        /// How the scan names a side's row for its `Lookup`: the rowid, or
        /// (without one) the key columns, which the scan reads anyway.
        func handle(_ shape: Shape, _ alias: String) -> [String] { shape.rowid.map { ["\(alias).\($0)"] } ?? [] }
        /// Lists `row` when it fits what is left of the budget, its column
        /// names and escapes counted; a row that does not ends the listing.
        func list(_ row: JSONValue) {
            let size = QueryRunner.encodedSize(row)
            guard size <= budget else { budget = 0; return }
            budget -= size
            changes.rows.append(row)
        }
        // Each side's rows are read by one set of statements, for both passes.
        let lookNew = try now.map { try Lookup(db, newTable, $0) }
        let lookOld = try was.map { try Lookup(db, oldTable, $0) }

        // Inserted and updated rows: the store's rows with no match in the
        // base, or whose common columns differ. The scan reads only keys and
        // rowids; the listed rows' values come from lookups, a batch of
        // columns at a time (see `Lookup`).
        if let now, let lookNew {
            let key = keyColumns(now, "n")
            var selected = key.sql + handle(now, "n")
            var sql: String
            if let was, let join {
                let common = now.columns.filter(was.columns.contains)
                let differs = common.map { "n.\(quoteIdentifier($0)) IS NOT o.\(quoteIdentifier($0))" }
                selected = [present(was, "o")] + selected + handle(was, "o")
                sql = "SELECT " + selected.joined(separator: ", ") + " FROM \(newTable) AS n LEFT JOIN \(oldTable) AS o ON \(join) WHERE NOT \(present(was, "o"))"
                if !differs.isEmpty { sql += " OR " + balanced(differs, "OR") }
            } else {
                // Every row is new: count them apart, read only the rows listed.
                sql = "SELECT " + (["0"] + selected).joined(separator: ", ") + " FROM \(newTable) AS n LIMIT \(limit)"
            }
            let statement = try db.prepare(sql)
            let keyStart = 1, handleStart = keyStart + key.names.count
            while try statement.step() {
                let matched = statement.int64(0) != 0
                if matched { changes.updated += 1 } else { changes.inserted += 1 }
                guard changes.rows.count < limit, budget > 0 else {
                    // Counted apart when nothing matches: no need to read on.
                    if join == nil { break } else { continue }
                }
                let keys = (keyStart..<handleStart).map { statement.column($0) }
                let newHandle = now.rowid == nil ? keys : [statement.column(handleStart)]
                let oldHandle = was?.rowid == nil ? keys : [statement.column(now.rowid == nil ? handleStart : handleStart + 1)]
                // A row that does not fit ends the listing, as below.
                guard let new = try lookNew.object(newHandle, budget: budget) else { budget = 0; continue }
                var old: JSONValue = .null
                if matched, let lookOld {
                    guard let found = try lookOld.object(oldHandle, budget: budget - new.size) else { budget = 0; continue }
                    old = found.object
                }
                list(.object([
                    ("op", .string(matched ? "update" : "insert")),
                    ("key", .object(zip(key.names, keys).map { ($0, QueryRunner.json($1)) })),
                    ("old", old), ("new", new.object),
                ]))
            }
            if was == nil || join == nil { changes.inserted = try count(db, newTable) }
        }
        // Deleted rows: the base's rows with no match in the store.
        if let was, let lookOld {
            let key = keyColumns(was, "o")
            var sql = "SELECT " + (key.sql + handle(was, "o")).joined(separator: ", ") + " FROM \(oldTable) AS o"
            if let now, let join {
                sql += " LEFT JOIN \(newTable) AS n ON \(join) WHERE NOT \(present(now, "n"))"
            } else {
                sql += " LIMIT \(limit)"
            }
            let statement = try db.prepare(sql)
            while try statement.step() {
                changes.deleted += 1
                guard changes.rows.count < limit, budget > 0 else { if join == nil { break } else { continue } }
                let keys = (0..<key.names.count).map { statement.column($0) }
                guard let old = try lookOld.object(was.rowid == nil ? keys : [statement.column(key.names.count)], budget: budget) else { budget = 0; continue }
                list(.object([
                    ("op", .string("delete")), ("key", .object(zip(key.names, keys).map { ($0, QueryRunner.json($1)) })),
                    ("old", old.object), ("new", .null),
                ]))
            }
            if now == nil || join == nil { changes.deleted = try count(db, oldTable) }
        }
        return changes
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
