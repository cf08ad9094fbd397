// SPDX-License-Identifier: Apache-2.0
import SQLite

extension Inspector {
    /// The tables of `database` (no `sqlite_*`), each with its kind as
    /// `pragma_table_list` would say (`table`, `shadow`, `virtual`) and
    /// whether it is `WITHOUT ROWID`. Read from `sqlite_schema` and the
    /// table's own indexes, never from `pragma_table_list`, which first
    /// works out every view's columns: over a test's chain of views, each
    /// over the last, that is slow, and no time limit stops it.
    static func tableKinds(_ db: Connection, _ database: String) throws -> [(name: String, type: String, withoutRowid: Bool)] {
        let rows = try db.rows("SELECT name, sql FROM \(quoteIdentifier(database)).sqlite_schema WHERE type = 'table' "
                               + "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        // SQLite writes a virtual table's SQL from its own "CREATE VIRTUAL TABLE".
        var virtual: [String: String] = [:] // lower-cased name → module
        for row in rows {
            guard let name = row[0].string, let sql = row[1].string, sql.hasPrefix("CREATE VIRTUAL TABLE") else { continue }
            let words = sql.split(whereSeparator: { $0.isWhitespace || $0 == "(" })
            guard let using = words.firstIndex(where: { $0.lowercased() == "using" }), using + 1 < words.count else { continue }
            virtual[name.lowercased()] = words[using + 1].lowercased()
        }
        return try rows.compactMap { row in
            guard let name = row[0].string else { return nil }
            let lower = name.lowercased()
            if virtual[lower] != nil { return (name, "virtual", false) }
            // A shadow table: its virtual table's name, `_`, and a suffix that module keeps.
            let shadow = virtual.contains { table, module in
                lower.hasPrefix(table + "_") && Inspector.shadowSuffixes[module]?.contains(String(lower.dropFirst(table.count + 1))) == true
            }
            let type = shadow ? "shadow" : "table"
            // WITHOUT ROWID: its primary key index holds no rowid (cid -1) after the key.
            let withoutRowid = try db.rows("""
                SELECT EXISTS (SELECT 1 FROM pragma_index_list(?1, ?2) AS l WHERE l.origin = 'pk'
                    AND NOT EXISTS (SELECT 1 FROM pragma_index_xinfo(l.name, ?2) WHERE cid = -1))
                """, [.text(name), .text(database)]).first?[0].isTrue ?? false
            return (name, type, withoutRowid)
        }
    }

    /// The shadow tables SQLite's own virtual table modules keep (their `xShadowName`).
    static let shadowSuffixes: [String: Set<String>] = [
        "fts5": ["config", "content", "data", "docsize", "idx"],
        "fts4": ["content", "segments", "segdir", "docsize", "stat"],
        "fts3": ["content", "segments", "segdir", "docsize", "stat"],
        "rtree": ["node", "parent", "rowid"],
        "geopoly": ["node", "parent", "rowid"],
    ]

    /// The structure of a database: tables with columns, indexes and foreign
    /// keys, then views and triggers. Compared structurally by the migration
    /// checks, so it leaves out SQL text for tables and indexes. `database`:
    /// which of the connection's databases (`main`, or an attached one).
    /// `maxBytes`: the answer's budget (a store may hold thousands of
    /// tables with long names, defaults and view SQL): tables, then views
    /// and triggers, stop once it is spent, and `truncated` says whether they did.
    public static func schema(_ db: Connection, database: String = "main", includeBookkeeping: Bool = false,
                              maxBytes: Int? = nil) throws -> JSONValue {
        var spent = 0, truncated = false
        /// Counts `texts` and `more` bytes (and a member's punctuation) against the budget; false once it is spent.
        func fits(_ texts: [String?], more: Int64 = 0) -> Bool {
            guard let maxBytes, !truncated else { return !truncated }
            spent += texts.reduce(16 + Int(clamping: more)) { $0 + ($1?.utf8.count ?? 4) + 16 }
            truncated = spent > maxBytes
            return !truncated
        }
        let catalog = quoteIdentifier(database) + ".sqlite_schema"
        let on: SQLiteValue = .text(database)
        var names = try db.rows("SELECT name FROM \(catalog) WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
            .compactMap { $0.first?.string }
        if !includeBookkeeping {
            let bookkeeping = bookkeepingTables
            names = names.filter { !bookkeeping.contains($0) }
        }
        var tables: [JSONValue] = []
        for name in names {
            guard fits([name]) else { break }
            var columns: [JSONValue] = []
            for r in try db.rows("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?, ?) ORDER BY cid", [.text(name), on]) {
                guard fits([r[0].string, r[1].string, r[3].string]) else { break }
                columns.append(["name": .string(r[0].string ?? ""), "type": .string(r[1].string ?? ""), "notnull": .bool(r[2].isTrue),
                                "default": JSONValue(r[3].string), "pk": .int(r[4].int64 ?? 0)])
            }
            var indexes: [JSONValue] = []
            for r in try db.rows("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?, ?) ORDER BY name", [.text(name), on]) {
                let indexName = r[0].string ?? ""
                let cols = try db.rows("SELECT name FROM pragma_index_info(?, ?) ORDER BY seqno", [.text(indexName), on]).map { JSONValue($0[0].string) }
                guard fits([indexName] + cols.map { $0.stringValue }) else { break }
                indexes.append(["name": .string(indexName), "unique": .bool(r[1].isTrue), "origin": .string(r[2].string ?? ""),
                                "partial": .bool(r[3].isTrue), "columns": .array(cols)])
            }
            var keys: [Int64: (table: String, from: [JSONValue], to: [JSONValue], onUpdate: String, onDelete: String)] = [:]
            for r in try db.rows("SELECT id, \"table\", \"from\", \"to\", on_update, on_delete FROM pragma_foreign_key_list(?, ?) ORDER BY id, seq", [.text(name), on]) {
                guard fits([r[1].string, r[2].string, r[3].string]) else { break }
                let id = r[0].int64 ?? 0
                var k = keys[id] ?? (r[1].string ?? "", [], [], r[4].string ?? "", r[5].string ?? "")
                k.from.append(JSONValue(r[2].string))
                k.to.append(JSONValue(r[3].string))
                keys[id] = k
            }
            // A table's keys are a set, as SQLite defines them (the columns
            // within one key in order): listed sorted, not in the order the
            // CREATE TABLE gave them (Alembic's and create_all's differ).
            let foreignKeys: [JSONValue] = keys.values.map { k -> JSONValue in
                ["columns": .array(k.from), "table": .string(k.table), "to": .array(k.to), "on_update": .string(k.onUpdate), "on_delete": .string(k.onDelete)]
            }.sorted { $0.jsonText < $1.jsonText }
            tables.append(["name": .string(name), "columns": .array(columns), "indexes": .array(indexes), "foreign_keys": .array(foreignKeys)])
        }
        func named(_ type: String) throws -> [JSONValue] {
            var found: [JSONValue] = []
            // Each one's SQL read only while there is room for it.
            for r in try db.rows("SELECT name, tbl_name, length(CAST(sql AS BLOB)) FROM \(catalog) WHERE type = ? ORDER BY name", [.text(type)]) {
                guard fits([r[0].string, r[1].string], more: r[2].int64 ?? 0) else { break }
                let sql = try db.scalar("SELECT sql FROM \(catalog) WHERE type = ? AND name = ?", [.text(type), r[0]])
                found.append(["name": .string(r[0].string ?? ""), "table": .string(r[1].string ?? ""), "sql": JSONValue(sql?.string)])
            }
            return found
        }
        var members: [(String, JSONValue)] = [("tables", .array(tables)), ("views", .array(try named("view"))), ("triggers", .array(try named("trigger")))]
        if maxBytes != nil { members.append(("truncated", .bool(truncated))) }
        return .object(members)
    }
}
