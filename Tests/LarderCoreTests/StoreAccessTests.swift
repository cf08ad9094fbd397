import FileSystem
import Foundation
import LarderCore
import SQLite
import TestSupport
import XCTest

/// Stores that tests running as another user, or in another container, can
/// reach; stores a test holds locked; long polls whose client left.
final class StoreAccessTests: XCTestCase {
    func registry(_ scratch: Scratch, _ change: (inout Configuration) -> Void = { _ in }) throws -> (StoreRegistry, Provisioner) {
        var c = Configuration()
        c.root = scratch.path + "/root"
        c.fixtures = sampleFixtures
        change(&c)
        let core = try Core(configuration: c, readyCopies: 0)
        return (core.registry, core.provisioner)
    }

    func gallery(_ provisioner: Provisioner) throws -> (Store, Provenance) {
        var request = Provisioner.Request()
        request.template = "gallery"
        return try provisioner.create(try provisioner.plan(request), label: nil, ttlSeconds: nil)
    }

    func testStoresGetTheModeAndTheirDirectoriesMatch() throws {
        let scratch = Scratch()
        let (registry, provisioner) = try registry(scratch)
        let (store, _) = try gallery(provisioner)
        XCTAssertEqual(FileSystem.permissions(store.databasePath), 0o660)
        XCTAssertEqual(FileSystem.permissions(store.directory), 0o770)
        // Passed through to a store one was given, never listed.
        XCTAssertEqual(FileSystem.permissions(registry.layout.stores), 0o710)
        XCTAssertEqual(FileSystem.permissions(registry.root), 0o710)
        // SQLite gives its -wal and -shm the database file's bits.
        try registry.operate(store, exclusive: "fixtures", timeoutMs: 1000) { try $0.execute("INSERT INTO artists(name) VALUES ('x')") }
        let reader = try store.connect()
        _ = try reader.scalar("SELECT count(*) FROM artists")
        XCTAssertEqual(FileSystem.permissions(store.databasePath + "-wal"), 0o660)
        XCTAssertEqual(FileSystem.permissions(store.databasePath + "-shm"), 0o660)
    }

    func testAGroupMakesDirectoriesSetgidAndAWideModeOpensToEveryone() throws {
        let scratch = Scratch()
        let group = String(getgid())
        let (registry, provisioner) = try registry(scratch) { c in
            c.storeMode = 0o660
            c.storeGroup = group
        }
        let (store, _) = try provisioner.createEmpty(label: nil, ttlSeconds: nil)
        XCTAssertEqual(FileSystem.permissions(store.databasePath), 0o660)
        XCTAssertEqual(FileSystem.permissions(store.directory), 0o2770)
        XCTAssertEqual(FileSystem.permissions(registry.layout.stores), 0o710)

        let wide = Scratch()
        let (_, open) = try self.registry(wide) { $0.storeMode = 0o666 }
        let (everyone, _) = try open.createEmpty(label: nil, ttlSeconds: nil)
        XCTAssertEqual(FileSystem.permissions(everyone.databasePath), 0o666)
        XCTAssertEqual(FileSystem.permissions(everyone.directory), 0o777)
        XCTAssertEqual(FileSystem.permissions(wide.path + "/root/stores"), 0o711)
    }

    func testModeAndGroupSettingsAreChecked() throws {
        var c = Configuration()
        try c.set("store-mode", "0640")
        XCTAssertEqual(c.storeMode, 0o640)
        XCTAssertEqual(Configuration.settings.first { $0.name == "store-mode" }?.value(in: c), "0640")
        for bad in ["0400", "999", "rw", "01777", ""] { XCTAssertThrowsError(try c.set("store-mode", bad), bad) }
        let scratch = Scratch()
        XCTAssertThrowsError(try registry(scratch) { $0.storeGroup = "no-such-group-larder" }) { error in
            XCTAssertTrue("\(error)".contains("no group"), "\(error)")
        }
    }

    func testPathsAreShownUnderTheClientRoot() throws {
        let scratch = Scratch()
        let (registry, provisioner) = try registry(scratch) { $0.clientRoot = "/mnt/larder" }
        let (store, _) = try provisioner.createEmpty(label: nil, ttlSeconds: nil)
        XCTAssertEqual(registry.clientPath(store.databasePath), "/mnt/larder/stores/\(store.id)/store.sqlite")
        XCTAssertEqual(registry.clientPath("/elsewhere/x"), "/elsewhere/x")
    }

    func testAWriteTransactionATestHoldsIsAConflictAfterTheBusyWaitThenWorks() throws {
        let scratch = Scratch()
        let (registry, provisioner) = try registry(scratch) { $0.busyTimeoutMs = 100 }
        let (store, _) = try gallery(provisioner)
        let test = try Connection(path: store.databasePath, mode: .readWrite)
        try test.execute("BEGIN IMMEDIATE; INSERT INTO artists(name) VALUES ('held')")
        let started = ContinuousClock.now
        XCTAssertLarderError(.conflict, try registry.operate(store, exclusive: "fixtures", timeoutMs: 60_000) { db in
            try db.transaction { try db.execute("INSERT INTO artists(name) VALUES ('larder')") }
        }) { error in XCTAssertEqual(error.detail("retry_after_seconds"), .int(1)) }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(3), "the busy wait is short")
        try test.execute("COMMIT")
        try registry.operate(store, exclusive: "fixtures", timeoutMs: 60_000) { db in
            try db.transaction { try db.execute("INSERT INTO artists(name) VALUES ('larder')") }
        }
        XCTAssertEqual(try store.withReader { try $0.scalar("SELECT count(*) FROM artists WHERE name IN ('held', 'larder')")?.int64 }, 2)
    }

    func testListsByLabelPrefix() throws {
        let scratch = Scratch()
        let (registry, provisioner) = try registry(scratch)
        for label in ["ci-41/a", "ci-41/b", "ci-42/a", "other"] { _ = try provisioner.createEmpty(label: label, ttlSeconds: nil) }
        XCTAssertEqual(try registry.list(labelPrefix: "ci-41/").stores.compactMap(\.record.label).sorted(), ["ci-41/a", "ci-41/b"])
        XCTAssertEqual(registry.deleteAll(prefix: "ci-4"), 3)
        XCTAssertEqual(try registry.list().stores.compactMap(\.record.label), ["other"])
    }

    func testACancelledWaitReleasesItsWatch() throws {
        let scratch = Scratch()
        let (_, provisioner) = try registry(scratch)
        let (store, _) = try gallery(provisioner)
        let waiter = CountWaiter()
        let answered = Flag()
        let cancel = waiter.wait(on: store, for: try CountCondition.parseList("artists>=1000"), tables: nil, timeoutMs: 60_000) { _ in answered.set() }
        XCTAssertEqual(waiter.waiting, 1)
        cancel()
        XCTAssertEqual(waiter.waiting, 0)
        Thread.sleep(forTimeInterval: 0.4)
        XCTAssertFalse(answered.isSet, "a cancelled wait is never answered")
    }
}
