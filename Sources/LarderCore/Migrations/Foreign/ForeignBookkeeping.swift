// SPDX-License-Identifier: Apache-2.0
import SQLite

/// A tool whose bookkeeping Larder reads but never writes: an application's
/// own migrator (Alembic, GRDB, Django, Rails), so a database it made can be
/// placed at a version.
protocol ForeignBookkeeping: Sendable {
    /// The tables the tool keeps (never counted as data).
    static var tables: [String] { get }
    /// The state it recorded, or nil when its tables are not there.
    static func readState(_ db: Connection) throws -> AppliedState?
}
