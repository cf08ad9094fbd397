import FileSystem
import Foundation
@testable import LarderCore
import TestSupport
import XCTest

/// The index behind the listing against the obvious model (every store,
/// filtered, sorted newest first, cut at the cursor), through random
/// arrivals (some out of order, as concurrent creations land), removals
/// and pages of every size.
final class StoreIndexTests: XCTestCase {
    func store(_ sequence: Int64, label: String?) -> Store {
        let now = Timestamp.now
        let record = StoreRecord(id: "st_\(sequence)", sequence: sequence, label: label, createdAt: now, expiresAt: now)
        return Store(record: record, directory: "/nonexistent/\(sequence)")
    }

    func testPagesAreTheModelsPages() {
        var generator = SystemRandomNumberGenerator()
        var index = StoreIndex()
        var model: [Store] = []
        var next: Int64 = 1
        for round in 0..<2_000 {
            if model.isEmpty || Int.random(in: 0..<3, using: &generator) > 0 {
                // Mostly the next sequence; now and then one that a slower creation took earlier.
                let late = Int.random(in: 0..<8, using: &generator) == 0 && next > 3
                let sequence = late ? next - 2 : next
                if late && model.contains(where: { $0.sequence == sequence }) { continue }
                let s = store(late ? sequence : next, label: round % 3 == 0 ? "a" : (round % 3 == 1 ? "ab" : nil))
                if !late { next += 3 }
                index.insert(s)
                model.append(s)
            } else {
                let gone = model.remove(at: Int.random(in: 0..<model.count, using: &generator))
                XCTAssertTrue(index.remove(gone.id) === gone)
                XCTAssertNil(index.remove(gone.id))
            }
            XCTAssertEqual(index.count, model.count)
            guard round % 50 == 0 else { continue }
            assertPages(index, model, next: next)
        }
    }

    /// Every page of `index` is the model's, filtered or not, at several cursors and sizes.
    func assertPages(_ index: StoreIndex, _ model: [Store], next: Int64, file: StaticString = #filePath, line: UInt = #line) {
        let newestFirst = model.sorted { $0.sequence > $1.sequence }
        XCTAssertEqual(index.all.map(\.id), newestFirst.reversed().map(\.id), file: file, line: line)
        let filters: [((Store) -> Bool)?] = [nil, { $0.record.label?.hasPrefix("a") == true }, { $0.record.label == "ab" }]
        for wanted in filters {
            let all = newestFirst.filter { wanted?($0) ?? true }
            for below: Int64 in [.max, next / 2, 1, all.first?.sequence ?? 0] {
                for limit in [1, 7, 100] {
                    let page = index.page(below: below, limit: limit, wanted: wanted)
                    let older = all.filter { $0.sequence < below }
                    XCTAssertEqual(page.stores.map(\.id), older.prefix(limit).map(\.id), file: file, line: line)
                    XCTAssertEqual(page.remaining, older.count, file: file, line: line)
                    XCTAssertEqual(page.matching, all.count, file: file, line: line)
                }
            }
        }
    }

    /// The reaper removes the oldest first and a test its own, among the
    /// newest: both ends, past the point where the index gives back the
    /// room its removed stores left, then arrivals again.
    func testRemovalsAtBothEndsKeepThePages() {
        var index = StoreIndex()
        var model: [Store] = []
        var next: Int64 = 1
        func arrive(_ n: Int) {
            for i in 0..<n {
                let s = store(next, label: i % 2 == 0 ? "a" : "ab")
                next += 1
                index.insert(s)
                model.append(s)
            }
        }
        arrive(300)
        for round in 0..<250 {
            let gone = round % 4 == 3 ? model.removeLast() : model.removeFirst()
            XCTAssertTrue(index.remove(gone.id) === gone)
            assertPages(index, model, next: next)
        }
        assertPages(index, model, next: next)
        arrive(100)
        let middle = model.remove(at: model.count / 2)
        XCTAssertTrue(index.remove(middle.id) === middle)
        XCTAssertEqual(index.count, model.count)
        assertPages(index, model, next: next)
    }

    /// Walking the cursors of the registry's listing visits every store once, newest first.
    func testCursorsWalkEveryStoreOnceAfterARestart() throws {
        let scratch = Scratch()
        var configuration = Configuration()
        configuration.root = scratch.path + "/root"
        configuration.fixtures = sampleFixtures
        var made: [String] = []
        var bytes: Int64 = 0
        do {
            let core = try Core(configuration: configuration, readyCopies: 0)
            // Enough for the restart to read the records on several threads.
            for i in 0..<700 { made.append(try core.provisioner.createEmpty(label: "l\(i % 5)", ttlSeconds: nil).0.id) }
            for id in made.enumerated().filter({ $0.offset % 7 == 3 }).map(\.element) { try core.registry.delete(id) }
            made = made.enumerated().filter { $0.offset % 7 != 3 }.map(\.element)
            bytes = core.registry.refreshDiskUsage()
            core.close()
        }
        do {
            // Under a quota the restart's one pass measures the stores.
            var quota = configuration
            quota.maxDiskBytes = 1 << 40
            let core = try Core(configuration: quota, readyCopies: 0)
            XCTAssertFalse(core.registry.diskUsageUnmeasured)
            XCTAssertEqual(core.registry.diskBytes, bytes, "the restart's one pass counts what a recount does")
            core.close()
        }
        let core = try Core(configuration: configuration, readyCopies: 0)
        XCTAssertEqual(core.registry.count, made.count)
        // Without one the restart does not wait for it: the reaper's first pass measures them.
        XCTAssertTrue(core.registry.diskUsageUnmeasured)
        let reaper = Reaper(registry: core.registry, intervalSeconds: 3600)
        reaper.start()
        defer { reaper.stop() }
        let deadline = ContinuousClock.now + .seconds(10)
        while core.registry.diskUsageUnmeasured && ContinuousClock.now < deadline { Threads.sleep(milliseconds: 5) }
        XCTAssertEqual(core.registry.diskBytes, bytes, "the reaper's first pass counts what a recount does")
        var seen: [String] = [], cursor: String?
        repeat {
            let page = try core.registry.list(limit: 64, cursor: cursor)
            XCTAssertEqual(page.matching, made.count)
            XCTAssertEqual(page.remaining, made.count - seen.count)
            seen += page.stores.map(\.id)
            cursor = page.nextCursor
        } while cursor != nil
        XCTAssertEqual(seen, made.reversed())
        let labelled = try core.registry.list(label: "l2", limit: 1000)
        XCTAssertEqual(labelled.stores.map(\.id), made.reversed().filter { (try? core.registry.get($0).record.label) == "l2" })
        XCTAssertGreaterThan(labelled.stores.count, 100)
        let created = try core.provisioner.createEmpty(label: nil, ttlSeconds: nil).0
        XCTAssertEqual(try core.registry.list(limit: 1).stores.first?.id, created.id, "numbering goes on after the newest found")
    }
}
