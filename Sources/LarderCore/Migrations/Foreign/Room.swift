// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Android's Room: `room_master_table` holds the schema's identity hash;
/// the version is `PRAGMA user_version`, which Room sets (read after every
/// tool's table, as for any database).
enum Room: ForeignBookkeeping {
    static let tables = ["room_master_table"]

    static func readState(_ db: Connection) throws -> AppliedState? { nil }
}
