/// The migration directory layouts Larder reads, each as its own tool writes it.
public enum MigrationFormat: String, Sendable, CaseIterable {
    /// `0001_name.sql`; bookkeeping in `larder_migrations` plus `PRAGMA user_version`.
    case plain
    /// `1_name.up.sql` / `1_name.down.sql`; `schema_migrations(version, dirty)`.
    case golangMigrate = "golang-migrate"
    /// one file with `-- migrate:up` / `-- migrate:down`; `schema_migrations(version)`, a row per version.
    case dbmate
    /// `-- +goose Up` / `-- +goose Down`; `goose_db_version`.
    case goose
    /// `V1__name.sql`, `R__name.sql`; `flyway_schema_history`.
    case flyway

    /// Whether the format has down migrations to go back with.
    public var hasDown: Bool {
        switch self {
        case .golangMigrate, .dbmate, .goose, .flyway: return true
        case .plain: return false
        }
    }

    /// The table the owning tool keeps its bookkeeping in.
    public var bookkeepingTable: String {
        switch self {
        case .plain: return "larder_migrations"
        case .golangMigrate, .dbmate: return "schema_migrations"
        case .goose: return "goose_db_version"
        case .flyway: return "flyway_schema_history"
        }
    }
}

/// One versioned (or Flyway repeatable) migration.
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
    /// The format says it must run outside a transaction.
    public var noTransaction: Bool
    /// SHA-256 of the file(s), hex.
    public var checksum: String
    /// Flyway's own checksum (CRC-32 over the lines), for its history table.
    public var flywayChecksum: Int32
    public var isRepeatable: Bool { version.isEmpty }
}
