import SQLite

/// What a database says about the migrations applied to it.
public struct AppliedState: Sendable {
    /// Where the answer came from: a table name, `user_version`, `expect.json`, or nil.
    public var source: String?
    /// The highest version applied (canonical), or nil.
    public var current: String?
    /// Every version applied, when the source lists them (golang-migrate and
    /// user_version only know the newest: then every version up to it counts).
    public var listed: [String]?
    /// A migration was cut short outside a transaction (golang-migrate's `dirty`).
    public var dirty = false

    public static let none = AppliedState(source: nil, current: nil, listed: nil)

    /// The applied versions among `known`.
    public func applied(among known: [String]) -> Set<String> {
        if let listed { return Set(listed) }
        guard let current else { return [] }
        return Set(known.filter { VersionOrder.compare($0, current) <= 0 })
    }
}

/// Reads and writes each tool's own bookkeeping table, exactly as the tool does.
enum Bookkeeping {
    static func tableExists(_ db: Connection, _ name: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(name)]) != nil
    }

    static func columns(_ db: Connection, _ table: String) throws -> Set<String> {
        Set(try db.rows("SELECT name FROM pragma_table_info(?)", [.text(table)]).compactMap { $0.first?.string })
    }

    static func highest(_ versions: [String]) -> String? {
        versions.max(by: VersionOrder.less)
    }

    /// The state a database is in, read from the table of `format` when it
    /// has one, else from any tool Larder knows (read-only), else
    /// `PRAGMA user_version`.
    static func read(_ db: Connection, preferring format: MigrationFormat?) throws -> AppliedState {
        var order: [MigrationFormat] = [.flyway, .goose, .golangMigrate, .plain]
        if let format { order.removeAll { $0 == format }; order.insert(format, at: 0) }
        for f in order {
            if let state = try read(db, format: f) { return state }
        }
        return try readForeign(db)
    }

    static func read(_ db: Connection, format: MigrationFormat) throws -> AppliedState? {
        switch format {
        case .flyway:
            guard try tableExists(db, "flyway_schema_history") else { return nil }
            var latest: [String: String] = [:]
            for row in try db.rows("SELECT version, type FROM flyway_schema_history WHERE success AND version IS NOT NULL ORDER BY installed_rank") {
                if let v = row[0].string, let t = row[1].string { latest[VersionOrder.canonical(v)] = t }
            }
            let listed = latest.filter { $0.value != "UNDO_SQL" }.map(\.key)
            return AppliedState(source: "flyway_schema_history", current: highest(listed), listed: listed)
        case .goose:
            guard try tableExists(db, "goose_db_version") else { return nil }
            var state: [Int64: Bool] = [:]
            for row in try db.rows("SELECT version_id, is_applied FROM goose_db_version ORDER BY id") {
                if let v = row[0].int64, v != 0 { state[v] = row[1].isTrue }
            }
            let listed = state.filter(\.value).map { String($0.key) }
            return AppliedState(source: "goose_db_version", current: highest(listed), listed: listed)
        case .golangMigrate, .dbmate:
            guard try tableExists(db, "schema_migrations") else { return nil }
            let cols = try columns(db, "schema_migrations")
            if cols.contains("dirty") {
                let row = try db.rows("SELECT version, dirty FROM schema_migrations LIMIT 1").first
                guard let row, let v = row[0].int64, v >= 0 else { return AppliedState(source: "schema_migrations", current: nil, listed: nil) }
                return AppliedState(source: "schema_migrations", current: String(v), listed: nil, dirty: row[1].isTrue)
            }
            // dbmate and Rails: one row per applied version.
            let listed = try db.rows("SELECT version FROM schema_migrations").compactMap { $0[0].string }.map(VersionOrder.canonical)
            return AppliedState(source: "schema_migrations", current: highest(listed), listed: listed)
        case .plain:
            guard try tableExists(db, "larder_migrations") else { return nil }
            let listed = try db.rows("SELECT version FROM larder_migrations").compactMap { $0[0].string }
            return AppliedState(source: "larder_migrations", current: highest(listed), listed: listed)
        }
    }

    /// Other tools' tables, read only: Alembic, GRDB, Django; then user_version.
    static func readForeign(_ db: Connection) throws -> AppliedState {
        if try tableExists(db, "alembic_version"), let v = try db.scalar("SELECT version_num FROM alembic_version")?.string {
            return AppliedState(source: "alembic_version", current: v, listed: [v])
        }
        if try tableExists(db, "grdb_migrations") {
            let listed = try db.rows("SELECT identifier FROM grdb_migrations").compactMap { $0[0].string }
            let numeric = listed.map { String($0.prefix(while: \.isNumber)) }.filter { !$0.isEmpty }.map(VersionOrder.normalized)
            return AppliedState(source: "grdb_migrations", current: highest(numeric) ?? listed.last, listed: numeric.isEmpty ? listed : numeric)
        }
        if try tableExists(db, "django_migrations") {
            let names = try db.rows("SELECT name FROM django_migrations").compactMap { $0[0].string }
            let numeric = names.map { String($0.prefix(while: \.isNumber)) }.filter { !$0.isEmpty }.map(VersionOrder.normalized)
            return AppliedState(source: "django_migrations", current: highest(numeric), listed: Array(Set(numeric)))
        }
        if let v = try db.scalar("PRAGMA user_version")?.int64, v > 0 {
            return AppliedState(source: "user_version", current: String(v), listed: nil)
        }
        return .none
    }

    static func ensureTable(_ db: Connection, _ format: MigrationFormat) throws {
        switch format {
        case .plain:
            try db.execute("CREATE TABLE IF NOT EXISTS larder_migrations (version TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
        case .golangMigrate:
            try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version uint64,dirty bool); CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON schema_migrations (version);")
        case .dbmate:
            try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version varchar(128) primary key)")
        case .goose:
            if try !tableExists(db, "goose_db_version") {
                try db.execute("""
                    CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
                    INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1);
                    """)
            }
        case .flyway:
            try db.execute("""
                CREATE TABLE IF NOT EXISTS "flyway_schema_history" ("installed_rank" INT NOT NULL PRIMARY KEY, "version" VARCHAR(50), "description" VARCHAR(200) NOT NULL, "type" VARCHAR(20) NOT NULL, "script" VARCHAR(1000) NOT NULL, "checksum" INT, "installed_by" VARCHAR(100) NOT NULL, "installed_on" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')), "execution_time" INT NOT NULL, "success" BOOLEAN NOT NULL);
                CREATE INDEX IF NOT EXISTS "flyway_schema_history_s_idx" ON "flyway_schema_history" ("success");
                """)
        }
    }

    /// Records `migration` as applied (up).
    static func recordUp(_ db: Connection, _ format: MigrationFormat, _ m: Migration, milliseconds: Int) throws {
        try ensureTable(db, format)
        switch format {
        case .plain:
            try db.run("INSERT OR REPLACE INTO larder_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                       [.text(m.version), .text(m.name), .text(m.checksum)])
            if let v = Int32(m.version) { try db.execute("PRAGMA user_version = \(v)") }
        case .golangMigrate:
            try setGolangVersion(db, m.version, dirty: false)
        case .dbmate:
            try db.run("INSERT OR IGNORE INTO schema_migrations (version) VALUES (?)", [.text(m.fileVersion)])
        case .goose:
            try db.run("INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)", [.integer(Int64(m.version) ?? 0)])
        case .flyway:
            try flywayRow(db, m, type: "SQL", milliseconds: milliseconds)
        }
    }

    /// Records `migration` as rolled back; `previous` is the version below it.
    static func recordDown(_ db: Connection, _ format: MigrationFormat, _ m: Migration, previous: String?, milliseconds: Int) throws {
        try ensureTable(db, format)
        switch format {
        case .plain:
            try db.run("DELETE FROM larder_migrations WHERE version = ?", [.text(m.version)])
        case .golangMigrate:
            if let previous { try setGolangVersion(db, previous, dirty: false) } else { try db.execute("DELETE FROM schema_migrations") }
        case .dbmate:
            try db.run("DELETE FROM schema_migrations WHERE version = ?", [.text(m.fileVersion)])
        case .goose:
            try db.run("DELETE FROM goose_db_version WHERE version_id = ?", [.integer(Int64(m.version) ?? 0)])
        case .flyway:
            try flywayRow(db, m, type: "UNDO_SQL", milliseconds: milliseconds)
        }
    }

    /// Before a migration that runs outside a transaction: golang-migrate's
    /// `dirty` flag, so a cut-short run is visible to the tool.
    static func markDirty(_ db: Connection, _ format: MigrationFormat, _ m: Migration) throws {
        guard format == .golangMigrate else { return }
        try ensureTable(db, format)
        try setGolangVersion(db, m.version, dirty: true)
    }

    static func setGolangVersion(_ db: Connection, _ version: String, dirty: Bool) throws {
        try db.execute("DELETE FROM schema_migrations")
        try db.run("INSERT INTO schema_migrations (version, dirty) VALUES (?, ?)", [.integer(Int64(version) ?? 0), .integer(dirty ? 1 : 0)])
    }

    static func flywayRow(_ db: Connection, _ m: Migration, type: String, milliseconds: Int) throws {
        let rank = (try db.scalar("SELECT coalesce(max(installed_rank), 0) + 1 FROM flyway_schema_history")?.int64) ?? 1
        let script = type == "UNDO_SQL" ? (m.downFile ?? m.file) : m.file
        try db.run("""
            INSERT INTO flyway_schema_history (installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
            VALUES (?, ?, ?, ?, ?, ?, 'larder', ?, 1)
            """, [.integer(rank), m.isRepeatable ? .null : .text(m.fileVersion), .text(m.name.replacingOccurrences(of: "_", with: " ")),
                  .text(type), .text(script), .integer(Int64(m.flywayChecksum)), .integer(Int64(milliseconds))])
    }

    /// The checksum Flyway last recorded for a repeatable script.
    static func flywayRepeatableChecksum(_ db: Connection, script: String) throws -> Int64? {
        guard try tableExists(db, "flyway_schema_history") else { return nil }
        return try db.scalar("SELECT checksum FROM flyway_schema_history WHERE version IS NULL AND script = ? AND success ORDER BY installed_rank DESC LIMIT 1",
                             [.text(script)])?.int64
    }
}
