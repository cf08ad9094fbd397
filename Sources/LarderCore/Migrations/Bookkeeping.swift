// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite
import Synchronization

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

    /// The longest version kept, in UTF-8 bytes: a version goes into every
    /// record and answer, and a database a client made can say anything.
    public static let maxVersionBytes = 256

    /// The state with a version past `maxVersionBytes` left out (unknown).
    var bounded: AppliedState {
        guard let current, current.utf8.count > AppliedState.maxVersionBytes else { return self }
        var copy = self
        copy.current = nil
        return copy
    }

    /// The applied versions among `known`.
    public func applied(among known: [String]) -> Set<String> {
        if let listed { return Set(listed) }
        guard let current else { return [] }
        return Set(known.filter { VersionOrder.compare($0, current) <= 0 })
    }
}

/// Reading a database's migration state, whichever tool left it: the
/// format's own tool first, then every other tool, then the foreign tools
/// Larder only reads, then `PRAGMA user_version`.
enum Bookkeeping {
    static func tableExists(_ db: Connection, _ name: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(name)]) != nil
    }

    static func columns(_ db: Connection, _ table: String) throws -> Set<String> {
        Set(try db.rows("SELECT name FROM pragma_table_info(?)", [.text(table)]).compactMap { $0.first?.string })
    }

    /// A bookkeeping table's name in SQL as tools that put it in with `%s`
    /// write it (golang-migrate, goose): bare when it is a plain identifier,
    /// so the schema's text is theirs; quoted otherwise.
    static func bare(_ table: String) -> String {
        let plain = table.utf8.first.map { !(0x30...0x39).contains($0) } == true
            && table.utf8.allSatisfy { Catalog.isNameByte($0) && $0 != 0x2E && $0 != 0x2D }
        return plain ? table : quoteIdentifier(table)
    }

    /// What a reader takes of a bookkeeping table, in SQL: versions of at
    /// most `maxVersionBytes` (longer ones would be unknown anyway) and at
    /// most 100,000 rows. A table is a client's to fill (a build's, an
    /// upload's), and must not be read whole.
    static func bounded(_ column: String) -> String {
        "length(CAST(\(column) AS BLOB)) <= \(AppliedState.maxVersionBytes)"
    }
    static let rowLimit = " LIMIT 100000"

    /// Now as go-sqlite3 writes a Go `time.Time` (the Go tools' times, in
    /// UTC here): `2006-01-02 15:04:05.999999999-07:00`, the fraction's
    /// trailing zeros (and its dot, when nothing is left) dropped.
    static func goTime(_ now: (seconds: Int, nanoseconds: Int) = SystemClock.now()) -> String {
        let t = SystemClock.utc(now.seconds)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var text = "\(t.year)-\(two(t.month))-\(two(t.day)) \(two(t.hour)):\(two(t.minute)):\(two(t.second))"
        if now.nanoseconds > 0 {
            var fraction = String(now.nanoseconds)
            fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "+00:00"
    }

    static func highest(_ versions: [String]) -> String? {
        versions.max(by: VersionOrder.less)
    }

    /// The versions in migration names that start with one (`0003_add_x` → "3").
    static func leadingNumbers(_ names: [String]) -> [String] {
        names.map { String($0.prefix(while: \.isNumber)) }.filter { !$0.isEmpty }.map(VersionOrder.normalized)
    }

    /// Every table a migration tool keeps (never counted, never diffed as
    /// data): each tool's own name, and every name a template's
    /// `migrations_table` gave one.
    static var tables: Set<String> { named.withLock { $0 } }

    private static let named = Mutex<Set<String>>(Set(MigrationFormat.all.map { $0.bookkeepingTable } + foreign.flatMap { $0.tables }))

    /// A bookkeeping table a team renamed: hidden from counts and diffs from now on.
    static func register(_ table: String) {
        _ = named.withLock { $0.insert(table) }
    }

    /// The read-only readers of tools Larder does not run.
    static let foreign: [any ForeignBookkeeping.Type] = [Alembic.self, GRDB.self, Django.self, Rails.self, EFCore.self, CoreData.self, Room.self]

    /// The state a database is in, read from the table of `set`'s tool
    /// (by the team's name for it) when it has one, else from any tool
    /// Larder knows (read-only), else `PRAGMA user_version`.
    static func read(_ db: Connection, preferring set: MigrationSet?) throws -> AppliedState {
        try unbounded(db, preferring: set).bounded
    }

    private static func unbounded(_ db: Connection, preferring set: MigrationSet?) throws -> AppliedState {
        if let set, let state = try set.format.tool.readState(db, table: set.table, set: set) { return state }
        for tool in MigrationFormat.all where tool.name != set?.format.rawValue {
            if let state = try tool.readState(db, table: tool.bookkeepingTable) { return state }
        }
        for reader in foreign {
            if let state = try reader.readState(db) { return state }
        }
        if let v = try db.scalar("PRAGMA user_version")?.int64, v > 0 {
            return AppliedState(source: "user_version", current: String(v), listed: nil)
        }
        return .none
    }
}
