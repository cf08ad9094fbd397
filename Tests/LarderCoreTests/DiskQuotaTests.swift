import Dispatch
import FileSystem
import Foundation
@testable import LarderCore
import SQLite
import Synchronization
import TestSupport
import XCTest

/// `--max-disk-bytes` counts everything a store costs: its file, its base
/// when that is its own copy, ready copies, copies under way, builds under
/// way and the trash. Each attack of the hostile probe, kept as a test.
final class DiskQuotaTests: XCTestCase {
    /// The bytes of a database of about `mebibytes` MiB.
    func database(_ scratch: Scratch, mebibytes: Int) throws -> [UInt8] {
        let name = "big-\(mebibytes)-\(UUID().uuidString).sqlite"
        try scratch.database(name).execute("CREATE TABLE blobs (b BLOB); " + DiskQuotaTests.fill("blobs", rows: mebibytes * 16))
        return try FileSystem.readFile(scratch.path + "/" + name)
    }

    /// SQL that adds `rows` rows of 64 KiB to `table`.
    static func fill(_ table: String, rows: Int) -> String {
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows)) INSERT INTO \(table) SELECT zeroblob(65536) FROM n;"
    }

    func upload(_ core: CoreServices, _ bytes: [UInt8]) throws -> Store {
        try core.provisioner.createFromUpload(.bytes(bytes), template: nil, version: nil, label: nil, ttlSeconds: nil).0
    }

    /// Was: a 64 MiB upload was accepted under an 8 MiB quota.
    func testAnUploadPastTheQuotaIsRefusedBeforeAnythingIsWritten() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.maxDiskBytes = 8 << 20 }
        let big = try database(scratch, mebibytes: 16)
        XCTAssertLarderError(.quotaExceeded, try upload(core, big))
        XCTAssertEqual(core.registry.count, 0)
        XCTAssertEqual(core.registry.layout.halfMade, [])
        XCTAssertEqual(core.registry.usedBytes, 0, "no reservation is left behind")
        // One that fits, twice over (its file and its base), is made.
        let fits = try upload(core, try database(scratch, mebibytes: 2))
        XCTAssertEqual(core.registry.count, 1)
        // The records' journal counts too.
        let journal = FileSystem.size(core.registry.layout.journal)
        XCTAssertGreaterThan(journal, 0)
        XCTAssertGreaterThanOrEqual(core.registry.usedBytes, 2 * fits.sizeBytes + journal)
    }

    /// An upload's or a fork's base is a copy of its own, and a deleted
    /// store's files count until the trash has removed them.
    func testAPrivateBaseAndTheTrashCount() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let bytes = try database(scratch, mebibytes: 4)
        let store = try upload(core, bytes)
        XCTAssertGreaterThanOrEqual(core.registry.usedBytes, 2 * Int64(bytes.count), "the file and its base")
        let template = try core.store("gallery")
        XCTAssertEqual(template.diskCost, template.sizeBytes, "a template store's base is a second name of the cache entry")

        core.registry.trash.pause()
        let before = core.registry.usedBytes
        try core.registry.delete(store.id)
        XCTAssertEqual(core.registry.usedBytes, before, "in the trash, still on disk")
        core.registry.trash.resume()
        core.registry.drainTrash()
        XCTAssertLessThan(core.registry.usedBytes, Int64(bytes.count), "gone")
    }

    /// Was: parallel forks left 200 MiB under a 64 MiB quota.
    func testParallelForksStayWithinTheQuota() throws {
        let scratch = Scratch()
        let quota: Int64 = 40 << 20
        let core = try CoreServices(scratch) { $0.maxDiskBytes = quota }
        let source = try upload(core, try database(scratch, mebibytes: 4))
        let made = Atomic<Int>(0), refused = Atomic<Int>(0)
        let provisioner = core.provisioner
        DispatchQueue.concurrentPerform(iterations: 12) { _ in
            do {
                _ = try provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: nil)
                made.add(1, ordering: .relaxed)
            } catch let error as LarderError where error.code == .quotaExceeded {
                refused.add(1, ordering: .relaxed)
            } catch {
                XCTFail("\(error)")
            }
        }
        XCTAssertEqual(made.load(ordering: .relaxed) + refused.load(ordering: .relaxed), 12)
        XCTAssertGreaterThan(refused.load(ordering: .relaxed), 0)
        core.registry.refreshDiskUsage()
        XCTAssertLessThanOrEqual(core.registry.usedBytes, quota)
        let onDisk = FileSystem.entries(core.registry.layout.stores).reduce(Int64(0)) { total, id in
            let directory = core.registry.layout.stores + "/" + id
            return total + FileSystem.size(directory + "/store.sqlite") + FileSystem.size(directory + "/base.sqlite")
        }
        XCTAssertLessThanOrEqual(onDisk, quota, "what is really on disk")
    }

    /// Was (one run in ten): the request that found no ready copy asked for
    /// a refill, the refill filled the quota before the request reserved
    /// its own store, and that reservation took the room back from every
    /// copy at once. A copy ahead now leaves room for one more store.
    func testACopyAheadNeverTakesTheRoomOfTheStoreThatAskedForIt() throws {
        var request = Provisioner.Request()
        request.template = "gallery"
        let scratch = Scratch(), other = Scratch()
        let probe = try CoreServices(scratch)
        let size = try probe.provisioner.entry(try probe.provisioner.plan(request)).size
        probe.registry.close()
        let quota = size * 6 + size / 2
        let tight = try CoreServices(other, readyCopies: 8) { $0.maxDiskBytes = quota }
        let tightEntry = try tight.provisioner.entry(try tight.provisioner.plan(request))
        // The miss and its refill, the refill finishing first.
        XCTAssertNil(tight.provisioner.readyCopies.take(tightEntry))
        tight.provisioner.readyCopies.drain()
        let ahead = tight.provisioner.readyCopies.stats.copies
        XCTAssertGreaterThan(ahead, 0)
        _ = try tight.registry.create(copyOf: tightEntry, shelved: false, provenance: Provenance(), label: nil, ttlSeconds: nil)
        XCTAssertEqual(tight.provisioner.readyCopies.stats.copies, ahead, "the copies kept their room")
        XCTAssertLessThanOrEqual(tight.registry.usedBytes, quota)
    }

    /// Was: refused requests produced hundreds of MiB of ready copies, and
    /// ready copies took back room freed on a full disk. Now they are made
    /// only into room to spare, and give it back when a store needs it.
    func testReadyCopiesFillOnlySpareRoomAndGiveItBack() throws {
        let scratch = Scratch()
        let probe = try CoreServices(scratch)
        let size = try probe.store("gallery").sizeBytes
        probe.registry.close()
        let quota = size * 6 + size / 2
        let other = Scratch()
        let core = try CoreServices(other, readyCopies: 8) { $0.maxDiskBytes = quota }
        _ = try core.store("gallery")
        core.provisioner.readyCopies.drain()
        let copies = core.provisioner.readyCopies.stats.copies
        XCTAssertTrue((1...5).contains(copies), "room for five more, so at most five copies ahead, not eight: \(copies)")
        XCTAssertLessThanOrEqual(core.registry.usedBytes, quota)

        // A store of another kind needs the room (its file and base take
        // about three template stores): the copies give it back.
        let small = try database(scratch, mebibytes: 0)
        XCTAssertGreaterThan(core.registry.usedBytes + 2 * Int64(small.count), quota, "it needs the copies' room")
        _ = try upload(core, small)
        XCTAssertLessThanOrEqual(core.registry.usedBytes, quota)

        // Refused requests make no copies past the quota.
        for _ in 0..<4 { _ = try? core.store("gallery") }
        core.provisioner.readyCopies.drain()
        core.registry.drainTrash()
        XCTAssertLessThanOrEqual(core.registry.usedBytes, quota)
        let ready = readyCopyDirectories(core.registry.root).count
        XCTAssertEqual(ready, core.provisioner.readyCopies.stats.copies)
    }

    /// What a builder writes counts, and a claim past the quota is refused.
    func testBuildsUnderWayCount() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.maxDiskBytes = 6 << 20 }
        let builds = try BuildRegistry(registry: core.registry, cache: core.provisioner.cache)
        guard case .build(let info) = try builds.claim(key: "a", label: nil), let path = info.path else { return XCTFail("not started") }
        try Connection(path: path, mode: .readWrite).execute("CREATE TABLE t (b BLOB); " + DiskQuotaTests.fill("t", rows: 112))
        XCTAssertGreaterThan(core.registry.usedBytes, 7 << 20 - 1 << 20)
        XCTAssertLarderError(.quotaExceeded, try builds.claim(key: "b", label: nil))
        XCTAssertLarderError(.quotaExceeded, try core.store("gallery"))
    }
}

extension DiskQuotaTests {
    /// Was: with an 8 MiB cache budget the cache held a 38 MiB build. A
    /// build cannot be made again, so one past the whole budget is refused
    /// at finish (and stays under way, for its builder to discard).
    func testABuildPastTheCacheBudgetIsRefused() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let cache = try TemplateCache(directory: core.registry.layout.cache + "/small", maxBytes: 1 << 20)
        let builds = try BuildRegistry(registry: core.registry, cache: cache)
        guard case .build(let info) = try builds.claim(key: "big", label: nil), let path = info.path else { return XCTFail("not started") }
        try Connection(path: path, mode: .readWrite).execute("CREATE TABLE t (b BLOB); " + DiskQuotaTests.fill("t", rows: 32))
        XCTAssertLarderError(.quotaExceeded, try builds.finish("big"))
        XCTAssertTrue(builds.isBuilding("big"))
        XCTAssertEqual(FileSystem.entries(core.registry.layout.cache + "/small").filter { $0.hasSuffix(".sqlite") }, [])
    }
}
