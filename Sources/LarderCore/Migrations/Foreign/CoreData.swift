// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Core Data's SQLite store: `Z_METADATA` (the model's version hashes, in a
/// plist), `Z_PRIMARYKEY` (each entity's next key) and `Z_MODELCACHE`. Its
/// contents change as the app runs and are never data; the model version is
/// not a number Larder can read, so the store has none (null).
enum CoreData: ForeignBookkeeping {
    static let tables = ["Z_METADATA", "Z_PRIMARYKEY", "Z_MODELCACHE"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "Z_METADATA") else { return nil }
        return AppliedState(source: "Z_METADATA", current: nil, listed: [])
    }
}
