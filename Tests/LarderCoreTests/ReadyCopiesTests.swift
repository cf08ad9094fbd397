import FileSystem
import Foundation
@testable import LarderCore
import SQLite
import TestSupport
import XCTest

/// Ready copies: stores made ahead of the requests, in place, and handed out by writing their record.
final class ReadyCopiesTests: XCTestCase {
    func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    func testAHandOutIsByteForByteTheTemplatesCopyAndIsRefilled() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch, readyCopies: 3)
        let first = try core.store("gallery", fixtures: ["artists", "artworks"], label: "first")
        core.provisioner.readyCopies.drain()
        XCTAssertEqual(core.provisioner.readyCopies.stats.copies, 3)
        XCTAssertEqual(core.provisioner.readyCopies.stats.misses, 1)
        // Ready copies are no stores yet: not listed, not counted.
        XCTAssertEqual(core.registry.count, 1)
        XCTAssertEqual(try core.registry.list().stores.map(\.id), [first.id])

        let second = try core.store("gallery", fixtures: ["artists", "artworks"], label: "second")
        XCTAssertEqual(core.provisioner.readyCopies.stats.handouts, 1)
        XCTAssertEqual(second.record.label, "second")
        XCTAssertEqual(second.record.fixtures, ["artists", "artworks"])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: second.lastCounts ?? [])["artworks"], 12)
        XCTAssertEqual(try bytes(second.databasePath), try bytes(first.databasePath), "the same bytes as a copy made now")
        XCTAssertEqual(try core.registry.list().stores.map(\.id), [second.id, first.id])
        XCTAssertEqual(try second.connect().scalar("SELECT count(*) FROM artworks")?.int64, 12)
        // It resets like any store.
        try second.connect().execute("DELETE FROM artworks")
        _ = try core.editor.reset(second.id)
        XCTAssertEqual(try second.connect().scalar("SELECT count(*) FROM artworks")?.int64, 12)
        // Refills come in batches, once half the shelf is handed out.
        core.provisioner.readyCopies.drain()
        XCTAssertEqual(core.provisioner.readyCopies.stats.copies, 2)
        _ = try core.store("gallery", fixtures: ["artists", "artworks"])
        core.provisioner.readyCopies.drain()
        XCTAssertEqual(core.provisioner.readyCopies.stats.copies, 3)
        XCTAssertEqual(core.provisioner.readyCopies.stats.handouts, 2)
        XCTAssertEqual(readyCopyDirectories(core.registry.root).count, 3)
    }

    func testATemplateChangeIsNeverServedFromStaleCopies() throws {
        let scratch = Scratch()
        let fixtures = scratch.path + "/fixtures"
        try FileManager.default.copyItem(atPath: sampleFixtures, toPath: fixtures)
        let core = try CoreServices(scratch, fixtures: fixtures, readyCopies: 2)
        _ = try core.store("gallery")
        core.provisioner.readyCopies.drain()
        XCTAssertEqual(core.provisioner.readyCopies.stats.copies, 2)
        scratch.write(["0007_create_exhibitions.sql": "CREATE TABLE exhibitions (id INTEGER PRIMARY KEY, title TEXT);"],
                      under: "fixtures/gallery/migrations")
        let changed = try core.store("gallery")
        XCTAssertEqual(changed.record.version, "7")
        XCTAssertNotNil(try changed.connect().scalar("SELECT name FROM sqlite_schema WHERE name = 'exhibitions'"))
        XCTAssertEqual(core.provisioner.readyCopies.stats.handouts, 0)
        // Its own copies follow; the old key's are never handed out.
        core.provisioner.readyCopies.drain()
        let again = try core.store("gallery")
        XCTAssertEqual(core.provisioner.readyCopies.stats.handouts, 1)
        XCTAssertEqual(again.record.version, "7")
        XCTAssertNotNil(try again.connect().scalar("SELECT name FROM sqlite_schema WHERE name = 'exhibitions'"))
    }

    func testOnlyTheMostRecentlyUsedKeysStayStocked() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let registry = core.registry, provisioner = core.provisioner, cache = provisioner.cache
        let copies = ReadyCopies(lifecycle: registry.lifecycle, perKey: 2, maxKeys: 2, maxBytes: 1 << 30)
        var entries: [TemplateCache.Entry] = []
        for fixtures in [["artists"], ["artworks"], ["albums"]] {
            var request = Provisioner.Request()
            request.template = "gallery"
            request.fixtures = fixtures
            let plan = try provisioner.plan(request)
            entries.append(try cache.entry(plan.key) { try provisioner.build(plan, at: $0) })
        }
        for entry in entries {
            XCTAssertNil(copies.take(entry))
            copies.drain()
        }
        XCTAssertEqual(copies.stats.copies, 4, "two keys of two copies")
        XCTAssertNil(copies.take(entries[0]), "the coldest key was dropped")
        let taken = try XCTUnwrap(copies.take(entries[2]))
        registry.lifecycle.discard(taken)  // as a refused hand-out does
        copies.drain()
        registry.drainTrash()
        XCTAssertEqual(readyCopyDirectories(registry.root).count, copies.stats.copies)
        XCTAssertEqual(FileSystem.entries(registry.root + "/trash"), [])
    }

    /// Where copies are whole, ready copies stay within the byte budget,
    /// and an entry over half of it gets none; where they share blocks,
    /// only the count bounds them.
    func testWholeCopiesKeepTheByteBudgetAndLargeEntriesGetNone() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let entry = try core.provisioner.entry(try core.provisioner.plan({ var r = Provisioner.Request(); r.template = "gallery"; return r }()))
        func stocked(maxBytes: Int64, sharing: Bool) -> Int {
            let copies = ReadyCopies(lifecycle: core.registry.lifecycle, perKey: 8, maxBytes: maxBytes, sharingBlocks: sharing)
            XCTAssertNil(copies.take(entry))
            copies.drain()
            defer { copies.yield() }
            return copies.stats.copies
        }
        XCTAssertEqual(stocked(maxBytes: 1 << 30, sharing: false), 8)
        XCTAssertEqual(stocked(maxBytes: 3 * entry.size + entry.size / 2, sharing: false), 3, "three fit the budget")
        XCTAssertEqual(stocked(maxBytes: 2 * entry.size - 1, sharing: false), 0, "over half the budget: none")
        XCTAssertEqual(stocked(maxBytes: 2 * entry.size - 1, sharing: true), 8, "shared blocks take no room")
    }

    func testAtTheStoreLimitAHandOutIsRefusedAndItsCopyThrownAway() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch, readyCopies: 2) { $0.maxStores = 1 }
        _ = try core.store("boardgames")
        core.provisioner.readyCopies.drain()
        XCTAssertLarderError(.quotaExceeded, try core.store("boardgames"))
        XCTAssertEqual(core.registry.count, 1)
        core.provisioner.readyCopies.drain()
        core.registry.drainTrash()
        XCTAssertEqual(readyCopyDirectories(core.registry.root).count, 2, "refilled; the refused copy is gone")
    }

    func testARestartThrowsReadyCopiesAndTheTrashAway() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch, readyCopies: 4)
        let kept = try core!.store("gallery")
        core!.provisioner.readyCopies.drain()
        let root = core!.registry.root
        XCTAssertEqual(readyCopyDirectories(root).count, 4)
        core!.registry.close()
        core = nil
        // An earlier version kept its ready copies in ready/.
        scratch.write(["st_00000000000000000000000000000001/store.sqlite": "older"], under: "root/ready")

        let again = try CoreServices(scratch, readyCopies: 4)
        again.registry.drainTrash()
        XCTAssertEqual(readyCopyDirectories(root), [])
        XCTAssertFalse(FileSystem.exists(root + "/ready"))
        XCTAssertEqual(FileSystem.entries(root + "/stores"), [kept.id])
        XCTAssertEqual(FileSystem.entries(root + "/trash"), [])
        XCTAssertEqual(try again.registry.list().stores.map(\.id), [kept.id])
        XCTAssertEqual(again.provisioner.readyCopies.stats.copies, 0)
    }
}
