// SPDX-License-Identifier: Apache-2.0
import Digest
import FoundationEssentials
import SQLite

/// Core Data's SQLite store (SwiftData's too): `Z_METADATA` (the model's
/// version, in a binary plist), `Z_PRIMARYKEY` (each entity's next key),
/// `Z_MODELCACHE`, and with persistent history on, `ACHANGE`,
/// `ATRANSACTION` and `ATRANSACTIONSTRING`, which grow on every save. Their
/// contents change as the app runs and are never data; nor is an entity
/// table's `Z_OPT`, a counter every save of a row bumps. The shape follows
/// Apple's documented format; Larder reads it, never writes it.
enum CoreData: ForeignBookkeeping {
    static let tables = ["Z_METADATA", "Z_PRIMARYKEY", "Z_MODELCACHE", "ACHANGE", "ATRANSACTION", "ATRANSACTIONSTRING"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try isStore(db) else { return nil }
        var version: String?
        // (A hostile store may hold anything there: a plist of a sane size only.)
        if case .blob(let plist)? = try db.scalar("SELECT Z_PLIST FROM Z_METADATA ORDER BY Z_VERSION DESC LIMIT 1"), plist.count <= 1 << 20 {
            version = modelVersion(plist: plist)
        }
        return AppliedState(source: "Z_METADATA", current: version, listed: [])
    }

    /// Whether the database is a Core Data store: its metadata and key tables are there.
    static func isStore(_ db: Connection) throws -> Bool {
        try db.scalar("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('Z_METADATA', 'Z_PRIMARYKEY')")?.int64 == 2
    }

    /// What Core Data records of the model a store was saved with.
    struct Metadata: Decodable {
        var identifiers: [String]?
        var checksum: String?
        var hashes: [String: Data]?

        enum CodingKeys: String, CodingKey {
            case identifiers = "NSStoreModelVersionIdentifiers"
            case checksum = "NSStoreModelVersionChecksumKey"
            case hashes = "NSStoreModelVersionHashes"
        }
    }

    /// The model's version: its version identifiers when it names any (a
    /// model that sets none records `[""]`), else the checksum newer stores
    /// record, else a short digest of the entities' version hashes (never
    /// the store's UUID, which differs between two stores of one model).
    static func modelVersion(plist: [UInt8]) -> String? {
        guard let metadata = try? PropertyListDecoder().decode(Metadata.self, from: Data(plist)) else { return nil }
        let identifiers = (metadata.identifiers ?? []).filter { !$0.isEmpty }
        if !identifiers.isEmpty { return identifiers.joined(separator: ",") }
        if let checksum = metadata.checksum, !checksum.isEmpty { return checksum }
        guard let hashes = metadata.hashes, !hashes.isEmpty else { return nil }
        let digest = SHA256()
        for (entity, hash) in hashes.sorted(by: { $0.key < $1.key }) {
            digest.update(Array("\(entity.utf8.count):\(entity)=".utf8) + Array(hash))
        }
        return "hashes-" + digest.finalize().prefix(12)
    }

    /// Why a Core Data snapshot kept in a template is not migrated by its SQL.
    static func notMigratedHere(_ snapshot: String, template: String) -> String {
        "\(snapshot).sqlite of template '\(template)' is a Core Data store: Core Data migrates it, not this template's SQL migrations. "
            + "Check it as an app-migrated snapshot: upload it, let the app migrate it, then POST /stores/{id}/check "
            + "(LarderXCTest's LarderSnapshots and every client's snapshot helper do all three)"
    }

    /// An entity table's columns that are bookkeeping: `Z_OPT`, in a table
    /// with Core Data's `Z_PK`, `Z_ENT` and `Z_OPT`.
    static func bookkeepingColumns(_ columns: [String]) -> Set<String> {
        let upper = Set(columns.map { $0.uppercased() })
        guard upper.isSuperset(of: ["Z_PK", "Z_ENT", "Z_OPT"]) else { return [] }
        return Set(columns.filter { $0.uppercased() == "Z_OPT" })
    }
}
