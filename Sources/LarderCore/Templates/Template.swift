// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// One application's schema as its fixtures folder describes it.
public struct Template: Sendable {
    public struct Snapshot: Sendable {
        public var name: String
        public var path: String
        public var sha256: String
        /// The parsed `NAME.expect.json`, if there is one.
        public var expect: JSONValue?
        public var expectedVersion: String? { expect?["version"].flatMap(MigrationCheck.version) }
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
