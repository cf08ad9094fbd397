// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

/// One migration tool Larder reads and writes as the tool itself does: how
/// its files are named and split, and the bookkeeping table it keeps. A new
/// tool is one file with a type conforming to this, and one line in
/// `MigrationFormat.all`.
protocol MigrationTool: Sendable {
    /// The name in `template.json` and in answers (`"golang-migrate"`).
    static var name: String { get }
    /// The table the tool keeps its bookkeeping in (never counted as data).
    static var bookkeepingTable: String { get }
    /// Whether a file of a migrations directory is unmistakably this tool's
    /// (detection; `Plain` claims nothing and is the fallback).
    static func claims(file: String, text: String) -> Bool
    /// Whether the directory's layout is unmistakably this tool's (Diesel's
    /// folders): detection before any file is looked at.
    static func claims(directory: String) -> Bool
    /// The files of a migrations directory this tool reads, as paths below
    /// it (a folder's files for tools that keep a folder per migration).
    static func files(in directory: String) throws -> [String]
    /// Reads a directory's `.sql` files into `set` (versioned migrations and
    /// any repeatables); a file that does not fit is an error naming it.
    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws
    /// The state a database is in, from this tool's table (named `table`);
    /// nil when it has none.
    static func readState(_ db: Connection, table: String) throws -> AppliedState?
    /// Records `migration` as applied, as the tool would (its table is made when missing).
    static func recordUp(_ db: Connection, _ migration: Migration, table: String, milliseconds: Int) throws
    /// Records `migration` as rolled back; `previous` is the version below it.
    static func recordDown(_ db: Connection, _ migration: Migration, previous: String?, table: String, milliseconds: Int) throws
    /// Before a migration that runs outside a transaction, so a run cut short shows.
    static func markDirty(_ db: Connection, _ migration: Migration, table: String) throws
    /// Repeatable scripts due again (Flyway's `R__` whose checksum changed).
    static func repeatablesDue(_ db: Connection, in set: MigrationSet) throws -> [Migration]
    /// Whether Larder decides a migration's transaction itself (plain SQL,
    /// its own format): a `.dump`'s BEGIN/COMMIT are skipped and VACUUM runs
    /// outside. The other tools wrap each file in a transaction where SQLite
    /// refuses the file's own transaction control, and Larder refuses it as
    /// they do.
    static var decidesTransactions: Bool { get }
    /// How the team runs a file of this tool outside a transaction, for the
    /// error that refuses a file's own BEGIN or COMMIT.
    static var outsideTransactionHint: String { get }
    /// Whether the tool's migrations run with foreign keys on (Drizzle on
    /// better-sqlite3, where a migration's own `PRAGMA foreign_keys=OFF` in
    /// its transaction does nothing); else Larder turns them off, as most do.
    static var migratesWithForeignKeys: Bool { get }
    /// The state of a database, for tools whose table says it only with the
    /// migrations at hand (Drizzle's `created_at` high-water mark).
    static func readState(_ db: Connection, table: String, set: MigrationSet?) throws -> AppliedState?
    /// What the checks say of a template's migrations without failing them:
    /// the tool's foot-guns that bite real teams.
    static func notes(_ set: MigrationSet) -> [String]
}

extension MigrationTool {
    static func claims(directory: String) -> Bool { false }
    /// The directory's `.sql` files.
    static func files(in directory: String) throws -> [String] { FileSystem.entries(directory).filter { $0.hasSuffix(".sql") } }
    static func markDirty(_ db: Connection, _ migration: Migration, table: String) throws {}
    static func repeatablesDue(_ db: Connection, in set: MigrationSet) throws -> [Migration] { [] }
    static var decidesTransactions: Bool { false }
    static var migratesWithForeignKeys: Bool { false }
    static func readState(_ db: Connection, table: String, set: MigrationSet?) throws -> AppliedState? { try readState(db, table: table) }
    static func notes(_ set: MigrationSet) -> [String] { [] }
}

/// The migration format of a template: which tool's files and bookkeeping.
public struct MigrationFormat: Sendable, Hashable, CustomStringConvertible {
    let tool: any MigrationTool.Type

    /// Every tool Larder reads, in the order files are recognized (`Plain` last).
    static let all: [any MigrationTool.Type] = [Prisma.self, Drizzle.self, Diesel.self, Atlas.self, Flyway.self, GolangMigrate.self, Goose.self, Dbmate.self, SqlMigrate.self, Sqlx.self, Plain.self]
    /// Every format's name, as templates and the API give it.
    public static var names: [String] { all.map { $0.name } }

    public static let plain = MigrationFormat(tool: Plain.self)
    public static let golangMigrate = MigrationFormat(tool: GolangMigrate.self)
    public static let dbmate = MigrationFormat(tool: Dbmate.self)
    public static let goose = MigrationFormat(tool: Goose.self)
    public static let flyway = MigrationFormat(tool: Flyway.self)
    public static let sqlx = MigrationFormat(tool: Sqlx.self)
    public static let sqlMigrate = MigrationFormat(tool: SqlMigrate.self)
    public static let diesel = MigrationFormat(tool: Diesel.self)
    public static let prisma = MigrationFormat(tool: Prisma.self)
    public static let drizzle = MigrationFormat(tool: Drizzle.self)
    public static let atlas = MigrationFormat(tool: Atlas.self)

    /// Every format, as `template.json` names them.
    public static var allCases: [MigrationFormat] { all.map(MigrationFormat.init(tool:)) }

    public init?(rawValue: String) {
        guard let tool = MigrationFormat.all.first(where: { $0.name == rawValue }) else { return nil }
        self.tool = tool
    }

    init(tool: any MigrationTool.Type) { self.tool = tool }

    public var rawValue: String { tool.name }
    public var description: String { rawValue }

    public static func == (a: MigrationFormat, b: MigrationFormat) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// One versioned (or repeatable) migration.
public struct Migration: Sendable {
    public var version: String          // canonical; "" for a repeatable
    /// The version as the file writes it ("0003", "20240613061102"), which
    /// the owning tool records.
    public var fileVersion: String
    public var name: String             // description part of the file name
    public var file: String             // file name (of the up part)
    public var up: String
    public var down: String?
    public var downFile: String?
    /// Why its down cannot run, found when it was read (a tool that parses
    /// a direction only when it runs it fails then, not at load).
    public var downProblem: String?
    /// The format says it must run outside a transaction.
    public var noTransaction: Bool
    /// The same of its down (dbmate sets each section's apart).
    public var noTransactionDown: Bool
    /// SHA-256 of the file(s), hex.
    public var checksum: String
    /// The checksum the owning tool records, when it keeps one (Flyway's
    /// CRC-32 over the lines).
    public var toolChecksum: Int32?
    /// What else the owning tool records of the file: Atlas's hash from
    /// atlas.sum, and the statements its scanner counts.
    public var toolDigest: String?
    public var statementCount: Int?
    /// A migration in code (a Flyway Java or Kotlin class) that cannot run
    /// here: recorded as applied, never run, and reported by the checks.
    public var isCode = false
    public var isRepeatable: Bool { version.isEmpty }
}
