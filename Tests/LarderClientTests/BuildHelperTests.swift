import Foundation
import LarderClient
import SQLite
import Synchronization
import TestSupport
import XCTest

/// `LarderClient.build(key:migrate:)` against a real server: one worker
/// builds with its own SQLite, the others wait, everyone gets copies.
final class BuildHelperTests: XCTestCase {
    /// How many times migrators ran, across tasks.
    final class Runs: Sendable {
        let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    var larder: LarderClient { ClientTestServer.client }

    func uniqueKey(_ name: String) -> String { name + "-" + UUID().uuidString.prefix(8).lowercased() }

    /// What an app's own migrator leaves: its bookkeeping (GRDB's) and its tables.
    static func migrate(_ path: String, rows: Int = 2) throws {
        let db = try Connection(path: path, mode: .readWrite)
        try db.execute("""
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1'), ('v2');
            CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
            """)
        for i in 0..<rows { try db.run("INSERT INTO player (name) VALUES (?)", [.text("player \(i)")]) }
    }

    func testTwoWorkersAtOnceOneBuildsAndBothGetIndependentCopies() async throws {
        let key = uniqueKey("grdb")
        let runs = Runs()
        let client = larder
        let started = ContinuousClock.now
        async let first = client.build(key: key) { path in
            runs.add()
            try await Task.sleep(for: .milliseconds(400))
            try BuildHelperTests.migrate(path)
        }
        async let second = client.build(key: key) { path in
            runs.add()
            try await Task.sleep(for: .milliseconds(400))
            try BuildHelperTests.migrate(path)
        }
        let keys = try await [first, second]
        XCTAssertEqual(keys, [key, key])
        XCTAssertEqual(runs.value, 1, "one worker builds")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(400), "the waiter returned after the build")
        let info = try await larder.buildInfo(key: key)
        XCTAssertEqual(info.state, "ready")
        XCTAssertEqual(info.counts?["player"], 2)

        let a = try await larder.createStore(build: key)
        let b = try await larder.createStore(build: key, buildTimeout: .seconds(5))
        XCTAssertEqual(a.info.build, key)
        XCTAssertEqual(a.info.counts["player"], 2)
        try await a.query("INSERT INTO player (name) VALUES ('only in a')")
        let inB = try await b.counts()
        XCTAssertEqual(inB["player"], 2)
        try await a.delete()
        try await b.delete()
    }

    func testAFailingMigratorDiscardsTheBuildAndTheNextCallBuildsAgain() async throws {
        struct MigratorFailed: Error {}
        let key = uniqueKey("failing")
        do {
            try await larder.build(key: key) { _ in throw MigratorFailed() }
            XCTFail("the migrator's error comes back")
        } catch is MigratorFailed {}
        do {
            _ = try await larder.buildInfo(key: key)
            XCTFail("the build is discarded")
        } catch let error as LarderError {
            XCTAssertEqual(error.status, 404)
            XCTAssertEqual(error.code, "unknown_build")
        }
        let runs = Runs()
        try await larder.build(key: key, label: "second try") { path in
            try BuildHelperTests.migrate(path, rows: 1)
            runs.add()
        }
        XCTAssertEqual(runs.value, 1)
        let all = try await larder.builds()
        XCTAssertEqual(all.first { $0.key == key }?.label, "second try")
        try await larder.discardBuild(key: key)
    }

    func testAFileTheServerRefusesToFinishIsDiscarded() async throws {
        let key = uniqueKey("refused")
        do {
            try await larder.build(key: key) { path in
                try Data("not a database at all, but long enough to look like a page of one".utf8).write(to: URL(fileURLWithPath: path))
            }
            XCTFail("the server refuses to finish it")
        } catch let error as LarderError {
            XCTAssertEqual(error.status, 422, error.description)
        }
        do {
            _ = try await larder.buildInfo(key: key)
            XCTFail("the refused build is discarded")
        } catch let error as LarderError {
            XCTAssertEqual(error.code, "unknown_build")
        }
    }

    func testBadKeysAndUnknownBuildsAreTheServersErrors() async throws {
        do {
            try await larder.build(key: "bad key!") { _ in XCTFail("never runs") }
            XCTFail("a bad key is refused")
        } catch let error as LarderError {
            XCTAssertEqual(error.status, 400)
        }
        do {
            _ = try await larder.createStore(build: "no-such-build")
            XCTFail("an unknown build is refused")
        } catch let error as LarderError {
            XCTAssertEqual(error.code, "unknown_build")
        }
    }
}
