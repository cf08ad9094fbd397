// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite
import Synchronization

/// One application's schema as its fixtures folder describes it.
public struct Template: Sendable {
    public struct Snapshot: Sendable {
        public var name: String
        public var path: String
        /// `NAME.sqlite-wal` when one is kept beside it: its last writes.
        public var wal: String? = nil
        /// Of the file and its WAL.
        public var sha256: String
        /// The parsed `NAME.expect.json`, if there is one.
        public var expect: JSONValue?
        public var expectedVersion: String? { expect?["version"].flatMap(MigrationCheck.version) }

        /// The snapshot as SQLite reads it, as one new file at `target`: its
        /// WAL applied to the copy, the kept files only ever read.
        func copy(to target: String) throws {
            try FileSystem.copyFile(from: path, to: target)
            guard let wal else { return }
            try FileSystem.copyFile(from: wal, to: target + "-wal")
            let db = try Connection(path: target, mode: .readWrite)
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE")
        }

        /// What to say of a snapshot whose header says WAL with no `-wal` beside it.
        var missingWAL: String? {
            guard wal == nil, (try? FileSystem.readPrefix(path, count: 20))?.suffix(2) == [2, 2] else { return nil }
            return "\(name).sqlite is in WAL mode and no \(name).sqlite-wal is kept beside it: its last writes may be missing "
                + "(a database closed cleanly looks the same); keep the -wal with it, as the app left it"
        }
    }

    public var name: String
    public var directory: String
    public var migrations: MigrationSet
    public var fixtures: [String: DataFixture]
    public var fixtureHashes: [String: String]
    public var snapshots: [String: Snapshot]
    /// Fixtures applied when a request names none (`template.json` "fixtures").
    public var defaultFixtures: [String]
    /// How strict the round trip of its down migrations is (`template.json` "round_trip").
    public var roundTrip: TemplateSettings.RoundTrip = .exact
    /// Which reading of the folder this is: a new number each time the
    /// catalog (re)reads a template, so what was worked out from one
    /// reading can be kept while it is current.
    public var reading: Int = Template.nextReading()

    private static let readings = Atomic<Int>(0)
    private static func nextReading() -> Int { readings.add(1, ordering: .relaxed).newValue }

    public var fixtureNames: [String] { fixtures.keys.sorted() }
    public var snapshotNames: [String] { snapshots.keys.sorted() }

    public func fixture(_ name: String) throws -> DataFixture {
        guard let f = fixtures[name] else {
            throw LarderError(.unknownFixture, "template '\(self.name)' has no fixture '\(name)'; fixtures: \(fixtureNames.joined(separator: ", "))",
                              details: [("fixture", .string(name)), ("fixtures", JSONValue(fixtureNames))])
        }
        return f
    }

    public func snapshot(_ name: String) throws -> Snapshot {
        guard let s = snapshots[name] else {
            throw LarderError(.unknownSnapshot, "template '\(self.name)' has no snapshot '\(name)'; snapshots: \(snapshotNames.joined(separator: ", "))",
                              details: [("snapshot", .string(name)), ("snapshots", JSONValue(snapshotNames))])
        }
        return s
    }
}
