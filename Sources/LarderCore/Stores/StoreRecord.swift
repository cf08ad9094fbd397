// SPDX-License-Identifier: Apache-2.0
/// What Larder knows of a store, kept in the root's journal of records
/// (`RecordJournal`) so a restart finds it again.
public struct StoreRecord: Sendable {
    /// The longest label, in UTF-8 bytes: every listing, page and record repeats it.
    public static let maxLabelBytes = 256
    /// Fixture names a store's record keeps at most (each load adds its
    /// names): every line of the journal is the whole record, so a record
    /// must stay small however a test churns it.
    public static let maxFixtures = 256

    /// Refuses to record more than `maxFixtures` names: `count` the names a record would hold.
    public static func check(fixtures count: Int) throws {
        guard count > maxFixtures else { return }
        throw LarderError.badRequest("a store records at most \(maxFixtures) fixture loads; this would make \(count): "
                                     + "load them in fewer names (or with `sql`/`rows`), or start a new store", reason: .tooManyFixtures,
                                     details: [("fixtures", .int(Int64(count))), ("max_fixtures", .int(Int64(maxFixtures)))])
    }

    /// A store's lifetime in seconds, as clients and `--ttl-seconds` give it: one second to a year.
    public static let ttlSeconds: ClosedRange<Int> = 1...31_536_000

    /// A label a client gave, refused when it is longer than `maxLabelBytes`.
    public static func check(label: String?) throws {
        guard let label, label.utf8.count > maxLabelBytes else { return }
        throw LarderError.badRequest("a label is at most \(maxLabelBytes) bytes; this one has \(label.utf8.count)", reason: .labelTooLong,
                          details: [("label_bytes", .int(Int64(label.utf8.count))), ("max_bytes", .int(Int64(maxLabelBytes)))])
    }

    public var id: String
    public var sequence: Int64
    public var template: String?
    public var version: String?
    public var snapshot: String?
    public var fixtures: [String]
    /// The key of the app-built template it was copied from.
    public var build: String?
    public var label: String?
    public var createdAt: Timestamp
    /// When the reaper removes it; a kept store's is `--kept-ttl-seconds` after it was kept.
    public var expiresAt: Timestamp
    public var keep: Bool
    /// Kept with `"keep": "forever"`: never removed but by a delete.
    public var keptForever: Bool
    /// What the store was made as, which a reset returns it to (its
    /// contents are the `base.sqlite` beside it); nil for stores an older
    /// Larder made, which kept no base.
    public var creation: Creation?
    /// Row counts as Larder last read them when the record was written
    /// (listings after a restart show them without opening every store);
    /// in memory they live in `Store.lastCounts`.
    public var counts: [(String, Int64)]?

    public struct Creation: Sendable, Equatable {
        public var version: String?
        public var fixtures: [String]
        /// What it started from when not a template's entry: "empty", "upload", "fork of st_...", "build KEY".
        public var source: String?
    }

    /// What the store was created as, in words (the `base` of its diff).
    public var creationDescription: String {
        guard let creation else { return "unknown (made by an older Larder)" }
        var words: [String] = []
        if let source = creation.source { words.append(source) }
        if let template {
            words.append((creation.source == nil ? "" : "; ") + "template \(template)" + (snapshot.map { " from snapshot \($0)" } ?? "")
                         + (creation.version.map { " at version \($0)" } ?? ""))
        }
        if !creation.fixtures.isEmpty { words.append("with fixtures " + creation.fixtures.joined(separator: ", ")) }
        return words.joined(separator: " ").replacing(" ; ", with: "; ")
    }

    public init(id: String, sequence: Int64, template: String? = nil, version: String? = nil, snapshot: String? = nil,
                fixtures: [String] = [], build: String? = nil, label: String? = nil, createdAt: Timestamp, expiresAt: Timestamp, keep: Bool = false,
                keptForever: Bool = false, creation: Creation? = nil, counts: [(String, Int64)]? = nil) {
        self.id = id
        self.sequence = sequence
        self.template = template
        self.version = version
        self.snapshot = snapshot
        self.fixtures = fixtures
        self.build = build
        self.label = label
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.keep = keep
        self.keptForever = keep && keptForever
        self.creation = creation
        self.counts = counts
    }

    /// The record as one line of compact JSON (the journal's), which `init?(json:)` reads back.
    public func serialized() -> [UInt8] {
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key("id"); w.string(id)
        w.key("sequence"); w.int(sequence)
        w.key("template"); w.string(template)
        w.key("version"); w.string(version)
        w.key("snapshot"); w.string(snapshot)
        w.key("fixtures"); w.strings(fixtures)
        w.key("build"); w.string(build)
        w.key("label"); w.string(label)
        w.key("created_at"); w.double(createdAt.seconds)
        w.key("expires_at"); w.double(expiresAt.seconds)
        w.key("keep"); w.bool(keep)
        w.key("kept_forever"); w.bool(keptForever)
        w.key("creation")
        if let creation {
            w.beginObject()
            w.key("version"); w.string(creation.version)
            w.key("fixtures"); w.strings(creation.fixtures)
            w.key("source"); w.string(creation.source)
            w.endObject()
        } else {
            w.string(nil)
        }
        w.key("counts"); w.counts(counts)
        w.endObject()
        return w.bytes
    }

    public init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue, let sequence = json["sequence"]?.intValue,
              let created = json["created_at"], let expires = json["expires_at"] else { return nil }
        func seconds(_ v: JSONValue) -> Double? {
            switch v {
            case .double(let d): return d
            case .int(let i): return Double(i)
            default: return nil
            }
        }
        guard let c = seconds(created), let e = seconds(expires) else { return nil }
        self.init(id: id, sequence: sequence, template: json["template"]?.stringValue, version: json["version"]?.stringValue,
                  snapshot: json["snapshot"]?.stringValue,
                  fixtures: json["fixtures"]?.arrayValue?.compactMap(\.stringValue) ?? [], build: json["build"]?.stringValue,
                  label: json["label"]?.stringValue, createdAt: Timestamp(seconds: c), expiresAt: Timestamp(seconds: e),
                  keep: json["keep"]?.boolValue ?? false,
                  // A store an older Larder kept was promised to outlive its ttl until deleted.
                  keptForever: json["kept_forever"]?.boolValue ?? (json["keep"]?.boolValue ?? false),
                  creation: json["creation"]?["fixtures"]?.arrayValue.map { fixtures in
                      Creation(version: json["creation"]?["version"]?.stringValue, fixtures: fixtures.compactMap(\.stringValue),
                               source: json["creation"]?["source"]?.stringValue)
                  },
                  counts: json["counts"]?.objectMembers?.compactMap { name, value in value.intValue.map { (name, $0) } })
    }
}
