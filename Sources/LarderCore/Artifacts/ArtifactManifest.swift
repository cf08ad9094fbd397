// SPDX-License-Identifier: Apache-2.0
/// `manifest.json` of an artifact: what the store was (its record), what the
/// snapshot holds (counts, each table's columns, its size and SHA-256, what
/// the test changed) and which Larder and SQLite made it.
enum ArtifactManifest {
    /// `withBase`: the zip holds the creation state too, as `base.sqlite`.
    static func json(_ record: StoreRecord, _ snapshot: DatabaseSnapshot, sha256: String, withBase: Bool) -> JSONValue {
        let known: JSONValue = [
            "id": .string(record.id), "label": JSONValue(record.label), "template": JSONValue(record.template),
            "version": JSONValue(record.version), "snapshot": JSONValue(record.snapshot), "fixtures": JSONValue(record.fixtures),
            "counts": JSONValue(counts: snapshot.counts), "schema": .object(snapshot.columns.map { ($0.0, JSONValue($0.1)) }),
            "sqlite_version": .string(LarderVersion.sqlite), "sha256": .string(sha256),
            "size_bytes": .int(Int64(snapshot.size)), "created_at": .string(record.createdAt.rfc3339),
            "snapshot_at": .string(Timestamp.now.rfc3339), "larder_version": .string(LarderVersion.current),
            "changes": snapshot.changeCounts ?? .null,
        ]
        var members = known.objectMembers ?? []
        if withBase { members.append(("base", "base.sqlite")) }
        return .object(members)
    }
}
