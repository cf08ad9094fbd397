// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The contract's store object (`POST /stores`, `GET /stores/{id}`, the
/// listing, PATCH, reset): its encoding and its OpenAPI schema side by side,
/// so that one cannot change without the other in view.
enum StoreAnswer {
    /// The members of a store's `links`.
    static let linkTails: [StaticString] = ["self", "artifact", "database", "counts", "query", "migrate", "migrations", "fixtures", "schema"]
    static let links = linkTails.map { "\($0)" }

    static let schema: JSONValue = OpenAPI.answer([
        ("id", ["type": "string", "pattern": "^st_[0-9a-f]{32}$"]),
        ("path", ["type": "string", "description": "The live SQLite file, under --client-root when set: open it with your own driver."]),
        ("template", OpenAPI.nullableString), ("version", OpenAPI.nullableString), ("snapshot", OpenAPI.nullableString),
        ("fixtures", OpenAPI.strings), ("build", OpenAPI.nullableString), ("label", OpenAPI.nullableString), ("counts", OpenAPI.counts),
        ("created_at", OpenAPI.time),
        ("expires_at", ["type": ["string", "null"], "format": "date-time",
                        "description": "When it is removed: its ttl, or --kept-ttl-seconds after it was kept; null when kept forever."]),
        ("keep", OpenAPI.boolean), ("size_bytes", OpenAPI.nonNegative),
        ("links", OpenAPI.answer(links.map { ($0, ["type": "string", "format": "uri"]) })),
    ])

    static let object = ContractObject("Store", schema)
    static let listObject = ContractObject("StoreList", refers: [object], OpenAPI.answer([
        ("stores", ["type": "array", "items": object.ref]), ("next_cursor", OpenAPI.nullableString),
    ]))
    static let deletedObject = ContractObject("Deleted", OpenAPI.answer([("deleted", OpenAPI.nonNegative)]))

    /// The listing, `{"stores": [...], "next_cursor": ...}`, from its stores
    /// already serialized (as `serialized(...)` writes each), in parts, each
    /// a comma-separated run of stores (none, one or many): a long page is
    /// written on every core, a part each; the pieces answered here are
    /// sent one after another, never joined (`Response.Body.pieces`).
    static func listBody(serialized parts: [[UInt8]], next: String?) -> [[UInt8]] {
        var pieces = [Array(#"{"stores":["#.utf8)]
        for part in parts where !part.isEmpty {
            if pieces.count > 1 { pieces.append([UInt8(ascii: ",")]) }
            pieces.append(part)
        }
        pieces.append(Array(#"],"next_cursor":"#.utf8) + JSONValue(next).serialized() + [UInt8(ascii: "}")])
        return pieces
    }

    static func deleted(_ count: Int) -> JSONValue { ["deleted": .int(Int64(count))] }

    /// The store object, written straight into bytes (every hand-out and
    /// listing writes it). Counts and size are read live unless the caller
    /// already knows them (a store just made); a store whose test broke
    /// its file is still shown (and can be kept, to look at), with the
    /// counts Larder last read.
    static func serialized(_ s: ServerContext, _ store: Store, counts known: [(String, Int64)]?, sizeBytes: Int64? = nil) throws -> [UInt8] {
        var w = JSONWriter(capacity: 1024 + 128 * (known?.count ?? 8))
        try s.storeAnswers.write(store, counts: known, sizeBytes: sizeBytes, into: &w)
        return w.bytes
    }

    /// What every store's answer shares (its links' base, where paths are
    /// shown), made once for many: a listing makes one per part, each with
    /// bytes of its own, so that the cores writing the parts never count
    /// references to one shared object (the server's context, its base URL)
    /// for each store, which made them take turns at its cache line.
    struct Writer: Sendable {
        let links: LinkTemplate
        let clientPath: StoreRegistry.ClientPaths

        init(_ s: ServerContext) {
            links = LinkTemplate(base: s.base + "/stores/", tails: StoreAnswer.linkTails)
            clientPath = s.registry.clientPaths
        }

        /// `serialized`, written at the end of `w` (a listing writes its stores
        /// one after another into one buffer); on an error `w` is as it was.
        func write(_ store: Store, counts known: [(String, Int64)]?, sizeBytes: Int64? = nil, into w: inout JSONWriter) throws {
            let counts: [(String, Int64)]
            do {
                counts = try known ?? store.counts()
            } catch where Store.isDamage(error) {
                counts = store.lastCounts ?? []
            }
            let size = sizeBytes ?? store.sizeBytes
            // The record where it is kept, written piece by piece: no copy of
            // it, and no string made for its path, its links or its times.
            store.withRecord { record in
                w.beginObject()
                w.key("id"); w.string(record.id)
                w.key("path"); w.string(joining: clientPath(store.directory), "/", Store.databaseName)
                w.key("template"); w.string(record.template)
                w.key("version"); w.string(record.version)
                w.key("snapshot"); w.string(record.snapshot)
                w.key("fixtures"); w.strings(record.fixtures)
                w.key("build"); w.string(record.build)
                w.key("label"); w.string(record.label)
                w.key("counts"); w.counts(counts)
                w.key("created_at"); w.timestamp(record.createdAt)
                w.key("expires_at"); w.timestamp(record.keptForever ? nil : record.expiresAt)
                w.key("keep"); w.bool(record.keep)
                w.key("size_bytes"); w.int(size)
                w.key("links"); w.links(links, id: record.id)
                w.endObject()
            }
        }
    }
}
