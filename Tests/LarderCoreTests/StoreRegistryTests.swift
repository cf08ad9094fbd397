import FileSystem
import Foundation
import LarderCore
import SQLite
import Synchronization
import TestSupport
import XCTest

final class StoreRegistryTests: XCTestCase {
    func configuration(_ root: String) -> Configuration {
        var c = Configuration()
        c.root = root
        c.fixtures = sampleFixtures
        return c
    }

    func testCreateListPatchDelete() throws {
        let scratch = Scratch()
        let core = try Core(configuration: configuration(scratch.path + "/root"), readyCopies: 0)
        let registry = core.registry, provisioner = core.provisioner
        var ids: [String] = []
        for i in 0..<5 { ids.append(try provisioner.createEmpty(label: i % 2 == 0 ? "even" : "odd", ttlSeconds: nil).0.id) }
        XCTAssertTrue(ids.allSatisfy { $0.hasPrefix("st_") && $0.count == 35 })
        XCTAssertEqual(Set(ids).count, 5)
        let page1 = try registry.list(limit: 2)
        XCTAssertEqual(page1.stores.map(\.id), [ids[4], ids[3]])
        let page2 = try registry.list(limit: 2, cursor: page1.nextCursor)
        XCTAssertEqual(page2.stores.map(\.id), [ids[2], ids[1]])
        XCTAssertEqual(try registry.list(label: "even").stores.count, 3)
        let kept = try registry.update(ids[0], StoreRegistry.Patch(keep: .yes, label: .some("kept")))
        XCTAssertTrue(kept.record.keep)
        XCTAssertFalse(kept.record.keptForever)
        XCTAssertEqual(registry.reapExpired(now: Timestamp.now.adding(seconds: 7200)).count, 4, "kept stores outlive their ttl")
        // ... for --kept-ttl-seconds (7 days by default), unless kept forever.
        let forever = try provisioner.createEmpty(label: "forever", ttlSeconds: nil).0.id
        XCTAssertTrue(try registry.update(forever, StoreRegistry.Patch(keep: .forever)).record.keptForever)
        XCTAssertEqual(registry.reapExpired(now: Timestamp.now.adding(seconds: 6 * 86_400)), [])
        XCTAssertEqual(registry.reapExpired(now: Timestamp.now.adding(seconds: 8 * 86_400)), [ids[0]])
        XCTAssertEqual(registry.reapExpired(now: Timestamp.now.adding(seconds: 800 * 86_400)), [])
        // Unkept: its ordinary ttl from now.
        let unkept = try registry.update(forever, StoreRegistry.Patch(keep: .no))
        XCTAssertFalse(unkept.record.keep || unkept.record.keptForever)
        XCTAssertEqual(registry.reapExpired(now: Timestamp.now.adding(seconds: 3601)), [forever])
        XCTAssertEqual(registry.count, 0)
        XCTAssertLarderError(.storeNotFound, try registry.get(ids[0]))
        XCTAssertEqual(FileManager.default.fileExists(atPath: scratch.path + "/root/stores/" + ids[0]), false)
    }

    /// Stores are directories made and removed by the thousand: on ext4
    /// without a journal, `building/` spreads its shards, where stores are
    /// made, over the block groups (see `StoreRegistry.makeStaging`);
    /// elsewhere nothing is marked. The shards themselves are not: a store's
    /// mkdir in one stays cheap.
    func testTheStoreDirectoriesSpreadWhereExt4HasNoJournal() throws {
        let scratch = Scratch()
        let core = try Core(configuration: configuration(scratch.path + "/root"), readyCopies: 0)
        let layout = core.registry.layout
        XCTAssertEqual(FileSystem.spreadsSubdirectories(layout.building) == true, FileSystem.skipsRecentlyFreedInodes(layout.root))
        for directory in [layout.stores, layout.cache] + (0..<RootLayout.stagingShards).map({ layout.staging(shard: $0) }) {
            XCTAssertTrue(FileSystem.isDirectory(directory), directory)
            XCTAssertNotEqual(FileSystem.spreadsSubdirectories(directory), true, directory)
        }
        for _ in 0..<20 { _ = try core.provisioner.createEmpty(label: nil, ttlSeconds: nil) }
        XCTAssertEqual(core.registry.count, 20)
        XCTAssertEqual(layout.halfMade, [], "each made in a shard, then moved into stores/")
    }

    /// A shard of `building/` removed from outside (a test with the
    /// server's user can reach the root) is made again by the next store
    /// made in it, whichever way it is made; none fails for it.
    func testAStagingShardRemovedFromOutsideIsMadeAgain() throws {
        let scratch = Scratch()
        let core = try Core(configuration: configuration(scratch.path + "/root"), readyCopies: 0)
        let layout = core.registry.layout
        for shard in 0..<RootLayout.stagingShards { try FileSystem.removeTree(layout.staging(shard: shard), within: layout.root) }
        XCTAssertEqual(FileSystem.entries(layout.building), [])
        var wanted = Provisioner.Request()
        wanted.template = "gallery"
        let plan = try core.provisioner.plan(wanted)
        for i in 0..<(RootLayout.stagingShards + 2) {
            // Ready-copy style (a cache entry's copy) and built in place, in turn.
            if i % 2 == 0 {
                _ = try core.provisioner.create(plan, label: nil, ttlSeconds: nil)
            } else {
                _ = try core.provisioner.createEmpty(label: nil, ttlSeconds: nil)
            }
        }
        XCTAssertEqual(core.registry.count, RootLayout.stagingShards + 2)
        XCTAssertEqual(FileSystem.entries(layout.building).count, RootLayout.stagingShards)
        XCTAssertEqual(layout.halfMade, [])
    }

    func testReadsAndOperationsHaveTimeLimits() throws {
        let scratch = Scratch()
        var c = configuration(scratch.path + "/root")
        c.readTimeoutMs = 100
        c.operationTimeoutMs = 100
        let core = try Core(configuration: c, readyCopies: 0)
        let registry = core.registry, provisioner = core.provisioner
        let (store, _) = try provisioner.createEmpty(label: nil, ttlSeconds: nil)
        let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
        XCTAssertLarderError(.timeout, try store.withReader { try $0.scalar(endless) })
        XCTAssertLarderError(.timeout, try registry.operate(store, exclusive: "fixtures", timeoutMs: 100) { try $0.scalar(endless) })
        // Neither left the store busy or its pooled reader stuck.
        XCTAssertEqual(try store.withReader { try $0.scalar("SELECT 42")?.int64 }, 42)
        XCTAssertEqual(try registry.operate(store, exclusive: "fixtures", timeoutMs: 100) { try $0.scalar("SELECT 7")?.int64 }, 7)
    }

    /// SQLite's temporary files have one budget in the process: a registry
    /// without a disk quota lifts the one an earlier registry's quota set.
    func testARegistryWithoutAQuotaLiftsAnEarlierOnesTemporaryFileBudget() throws {
        let scratch = Scratch()
        var quota = configuration(scratch.path + "/quota")
        quota.maxDiskBytes = 4 << 20
        _ = try StoreRegistry(configuration: quota)
        _ = try StoreRegistry(configuration: configuration(scratch.path + "/free"))
        let db = try Connection(path: scratch.path + "/sort.sqlite")
        try db.execute("PRAGMA cache_size = -512")
        let sort = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT x, randomblob(100) AS b FROM c ORDER BY b"
        XCTAssertEqual(try db.rows(sort).count, 200_000, "a sort past the other root's quota")
    }

    func testRestartFindsCompleteStoresAndRemovesHalfBuiltOnes() throws {
        let scratch = Scratch()
        let root = scratch.path + "/root"
        var id = ""
        do {
            let registry = try StoreRegistry(configuration: configuration(root))
            let (store, _) = try registry.create(label: "survivor", ttlSeconds: 60) { path in
                let db = try Connection(path: path)
                try db.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1);")
                return Provenance()
            }
            id = store.id
        }
        // What a crash leaves: a half-built store and a store without its record.
        try FileManager.default.createDirectory(atPath: root + "/building/st_half", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/building/5/st_half/inner", withIntermediateDirectories: true)
        // (A mode no new shard has marks this one: an inode number may be reused.)
        try FileManager.default.setAttributes([.posixPermissions: 0o711], ofItemAtPath: root + "/building/5")
        try FileManager.default.createDirectory(atPath: root + "/stores/st_norecord", withIntermediateDirectories: true)
        // A shard swapped for a link to elsewhere: the link goes, never what it points at.
        let outside = scratch.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside + "/st_kept", withIntermediateDirectories: true)
        try FileSystem.removeTree(root + "/building/7", within: root)
        XCTAssertEqual(symlink(outside, root + "/building/7"), 0)
        let registry = try StoreRegistry(configuration: configuration(root))
        XCTAssertEqual(registry.count, 1)
        XCTAssertEqual(try registry.get(id).record.label, "survivor")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/building/st_half"))
        XCTAssertEqual(registry.layout.halfMade, [], "half-made stores in a shard go too")
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: root + "/building/5")[.posixPermissions] as? Int, 0o711,
                       "the shard itself is kept")
        XCTAssertTrue(FileManager.default.fileExists(atPath: outside + "/st_kept"), "nothing removed through a link")
        XCTAssertTrue(FileSystem.isDirectory(root + "/building/7", followingLinks: false), "the link is a shard again")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/stores/st_norecord"))
    }

    /// A restart knows each store's row counts as they were last read
    /// (kept in its record), so listings never open every store.
    func testCountsLastReadOutliveARestart() throws {
        let scratch = Scratch()
        var configuration = configuration(scratch.path + "/root")
        configuration.readyCopies = 0
        var ids: [String] = []
        do {
            let core = try Core(configuration: configuration)
            var request = Provisioner.Request()
            request.template = "gallery"
            request.fixtures = ["artists", "artworks"]
            ids.append(try core.provisioner.create(core.provisioner.plan(request), label: nil, ttlSeconds: nil).0.id)
            let loaded = try core.provisioner.create(core.provisioner.plan(request), label: nil, ttlSeconds: nil).0
            _ = try core.editor.loadFixtures(loaded.id, .sql("INSERT INTO artists (name) VALUES ('one more')"))
            ids.append(loaded.id)
            core.close()
        }
        let core = try Core(configuration: configuration)
        let counts = try ids.map { try Dictionary(uniqueKeysWithValues: XCTUnwrap(core.registry.get($0).lastCounts)) }
        XCTAssertEqual(counts.map { $0["artists"] }, [4, 5])
        XCTAssertEqual(counts.map { $0["artworks"] }, [12, 12])
    }

    func testARootIsOneServersAtATime() throws {
        let scratch = Scratch()
        let root = scratch.path + "/root"
        let first = try StoreRegistry(configuration: configuration(root))
        XCTAssertThrowsError(try StoreRegistry(configuration: configuration(root))) { error in
            XCTAssertEqual((error as? LarderError)?.code, .conflict)
            XCTAssertTrue((error as? LarderError)?.message.contains("pid \(getpid())") == true, "\(error)")
        }
        first.close()
        XCTAssertNoThrow(try StoreRegistry(configuration: configuration(root)))
    }

    func testRefusesARootItDidNotCreate() throws {
        let scratch = Scratch()
        scratch.write(["precious.txt": "do not delete"], under: "someone-elses")
        XCTAssertThrowsError(try StoreRegistry(configuration: configuration(scratch.path + "/someone-elses")))
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.path + "/someone-elses/precious.txt"))
    }

    func testARootThatCannotBeMadeSaysWhereAndWhy() throws {
        let scratch = Scratch()
        scratch.write(["in-the-way": "a file"], under: "state")
        XCTAssertThrowsError(try StoreRegistry(configuration: configuration(scratch.path + "/state/in-the-way/larder/root"))) { error in
            XCTAssertEqual("\(error)", "cannot create directory \(scratch.path)/state/in-the-way/larder: Not a directory")
        }
        XCTAssertThrowsError(try StoreRegistry(configuration: configuration(scratch.path + "/state/in-the-way"))) { error in
            XCTAssertTrue("\(error)".contains("is not a directory"), "\(error)")
        }
        // Every missing level is made; a second call finds them all there.
        let nested = scratch.path + "/made/step/by/step"
        try FileSystem.makeDirectories(nested)
        XCTAssertTrue(FileSystem.isDirectory(nested))
        XCTAssertNoThrow(try FileSystem.makeDirectories(nested))
    }

    func testAFailedBuildLeavesNothingBehind() throws {
        let scratch = Scratch()
        let registry = try StoreRegistry(configuration: configuration(scratch.path + "/root"))
        XCTAssertThrowsError(try registry.create(label: nil, ttlSeconds: nil) { _ in throw LarderError.badRequest("nope") })
        XCTAssertEqual(registry.layout.halfMade, [])
        XCTAssertEqual(FileSystem.entries(registry.layout.stores), [])
    }

    func testStoreLimitIsAQuotaError() throws {
        let scratch = Scratch()
        var c = configuration(scratch.path + "/root")
        c.maxStores = 1
        let registry = try StoreRegistry(configuration: c)
        _ = try registry.create(label: nil, ttlSeconds: nil) { path in _ = try Connection(path: path); return Provenance() }
        XCTAssertLarderError(.quotaExceeded, try registry.create(label: nil, ttlSeconds: nil) { _ in Provenance() })
    }
}

extension StoreRegistryTests {
    /// The reaper removes expired stores in the background and says which.
    func testTheReaperRemovesExpiredStoresAndSaysWhich() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let expiring = try core.provisioner.createEmpty(label: nil, ttlSeconds: 1).0
        let kept = try core.provisioner.createEmpty(label: nil, ttlSeconds: 3600).0
        let told = Mutex<[String]>([])
        let reaper = Reaper(registry: core.registry, intervalSeconds: 1) { ids in told.withLock { $0 += ids } }
        reaper.start()
        defer { reaper.stop() }
        let deadline = Date().addingTimeInterval(10)
        while told.withLock({ $0.isEmpty }) && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertEqual(told.withLock { $0 }, [expiring.id])
        XCTAssertEqual(try core.registry.list().stores.map(\.id), [kept.id])
    }
}
