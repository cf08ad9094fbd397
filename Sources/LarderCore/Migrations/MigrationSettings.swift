// SPDX-License-Identifier: Apache-2.0
/// How a team configured its migration tool (`template.json`): Larder reads
/// and records migrations as the tool does with the same settings.
public struct MigrationSettings: Sendable {
    /// A Flyway Java or Kotlin migration: it cannot run here, but it is
    /// recorded so the history has no gap.
    public struct CodeMigration: Sendable {
        public var version: String
        public var description: String
        /// The class Flyway records as the script (default: `V<version>__<description>`).
        public var script: String?
    }

    /// The format, when `template.json` names it instead of detecting it.
    public var format: MigrationFormat?
    /// The bookkeeping table's name, when the team renamed it.
    public var table: String?
    /// golang-migrate's `x-no-tx-wrap`: each file runs as written, outside a transaction.
    public var noTransactionWrap = false
    /// Flyway's placeholders, by lower-cased name.
    public var placeholders: [String: String] = [:]
    /// Flyway's `placeholderReplacement`.
    public var placeholderReplacement = true
    public var codeMigrations: [CodeMigration] = []

    public init() {}

    /// A setting that means nothing to `format`'s tool is a mistake worth naming.
    func check(against format: MigrationFormat, _ directory: String) throws {
        func refuse(_ key: String, _ tool: MigrationFormat) -> LarderError {
            MigrationSet.malformed(directory, "\"\(key)\" in template.json is \(tool.rawValue)'s setting, and these migrations are \(format.rawValue)")
        }
        if noTransactionWrap && format != .golangMigrate { throw refuse("no_tx_wrap", .golangMigrate) }
        if format != .flyway {
            if !placeholders.isEmpty { throw refuse("placeholders", .flyway) }
            if !placeholderReplacement { throw refuse("placeholder_replacement", .flyway) }
            if !codeMigrations.isEmpty { throw refuse("code_migrations", .flyway) }
        }
    }
}
