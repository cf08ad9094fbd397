import SQLite

/// goose (SQL migrations): `-- +goose Up` / `-- +goose Down` sections,
/// `StatementBegin/End`, `-- +goose NO TRANSACTION`; `goose_db_version` gets
/// a row per step, starting with goose's own version-0 row.
enum Goose: MigrationTool {
    static let name = "goose"
    static let bookkeepingTable = "goose_db_version"

    static func claims(file: String, text: String) -> Bool {
        text.contains("-- +goose Up") || text.contains("-- +goose Down")
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        try set.readMarked(files, contents, directory, up: "-- +goose Up", down: "-- +goose Down", upFlag: nil, noTransactionLine: "-- +goose NO TRANSACTION")
    }

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, bookkeepingTable) else { return nil }
        var state: [Int64: Bool] = [:]
        for row in try db.rows("SELECT version_id, is_applied FROM goose_db_version ORDER BY id") {
            if let v = row[0].int64, v != 0 { state[v] = row[1].isTrue }
        }
        let listed = state.filter(\.value).map { String($0.key) }
        return AppliedState(source: bookkeepingTable, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection) throws {
        guard try !Bookkeeping.tableExists(db, bookkeepingTable) else { return }
        try db.execute("""
            CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
            INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1);
            """)
    }

    static func recordUp(_ db: Connection, _ m: Migration, milliseconds: Int) throws {
        try ensureTable(db)
        try db.run("INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)", [.integer(Int64(m.version) ?? 0)])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, milliseconds: Int) throws {
        try ensureTable(db)
        try db.run("DELETE FROM goose_db_version WHERE version_id = ?", [.integer(Int64(m.version) ?? 0)])
    }
}
