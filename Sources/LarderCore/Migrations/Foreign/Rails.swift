// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Rails (ActiveRecord): `schema_migrations` has a row per applied version,
/// exactly as dbmate writes it, so `Dbmate` reads it; Rails adds
/// `ar_internal_metadata`, which is bookkeeping too.
enum Rails: ForeignBookkeeping {
    static let tables = ["ar_internal_metadata"]

    static func readState(_ db: Connection) throws -> AppliedState? { nil }
}
