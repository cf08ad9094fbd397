import FileSystem
@testable import LarderCore
import TestSupport
import XCTest

/// A store walked through every arrow of `StoreState`'s diagram with real
/// files: after each transition it is where its state says, each move is
/// one the state allows, and the ledger counts it where it is.
final class StoreLifecycleTests: XCTestCase {
    func testEveryTransitionMovesTheStoreAsTheDiagramSays() throws {
        let scratch = try Scratch()
        let core = try CoreServices(scratch) { $0.sync = "off" }
        let lifecycle = core.registry.lifecycle, ledger = core.registry.ledger
        var walked: [StoreState?] = []
        func step(_ id: String, _ expected: StoreState?, file: StaticString = #filePath, line: UInt = #line) {
            let now = lifecycle.state(of: id)
            XCTAssertEqual(now, expected, file: file, line: line)
            if let last = walked.last, let from = last, let to = now {
                XCTAssertTrue(from.next.contains(to), "\(from) → \(to) is not an arrow of the diagram", file: file, line: line)
            }
            walked.append(now)
        }

        // none → staging → ready → live → live (record) → trashed → none
        let staged = try lifecycle.stage(privately: true)
        step(staged.id, .staging)
        try FileSystem.writeFile(Array("not a database, only bytes".utf8), to: staged.path + "/" + Store.databaseName)
        let copy = try lifecycle.shelve(staged, bytes: 26)
        step(copy.id, .ready)
        XCTAssertEqual(ledger[.ready], 26)
        XCTAssertFalse(FileSystem.exists(staged.path), "moved whole out of building/")
        let store = try lifecycle.enter(.ready(copy), provenance: Provenance(source: "empty"), label: "walked", ttlSeconds: nil)
        step(copy.id, .live)
        XCTAssertEqual(ledger[.ready], 0, "counted as the store's now")
        XCTAssertEqual(ledger[.stores], 26)
        XCTAssertEqual(RecordJournal.read(core.registry.layout.journal).records[copy.id]?.label, "walked", "entering writes its line")
        _ = store.update { $0.label = "renamed" }
        try lifecycle.record(store)
        step(copy.id, .live)
        XCTAssertEqual(RecordJournal.read(core.registry.layout.journal).records[copy.id]?.label, "renamed", "a record is one more line")
        core.registry.trash.pause()
        try lifecycle.delete(copy.id)
        step(copy.id, .trashed)
        core.registry.trash.resume()
        core.registry.drainTrash()
        XCTAssertNil(lifecycle.state(of: copy.id), "the trash's queue removes it")
        XCTAssertEqual(ledger[.stores], 0, "without a quota the trash measures what it removed, and takes it from the stores'")

        // staging → none, and ready → none: what never became a test's store leaves nothing.
        let abandoned = try lifecycle.stage()
        lifecycle.abandon(abandoned)
        XCTAssertNil(lifecycle.state(of: abandoned.id))
        let dropped = try lifecycle.shelve(try lifecycle.stage(), bytes: 10)
        lifecycle.drop(dropped)
        XCTAssertNil(lifecycle.state(of: dropped.id))
        XCTAssertEqual(ledger[.ready], 0)
    }

    func testRecoverIsTheWayBackAfterAStop() throws {
        let scratch = try Scratch()
        var ids: (staging: String, ready: String, live: String) = ("", "", "")
        do {
            let core = try CoreServices(scratch) { $0.sync = "off" }
            let lifecycle = core.registry.lifecycle
            ids.staging = try lifecycle.stage().id
            ids.ready = try lifecycle.shelve(try lifecycle.stage(), bytes: 0).id
            let live = try lifecycle.shelve(try lifecycle.stage(), bytes: 0)
            ids.live = try lifecycle.enter(.ready(live), provenance: Provenance(source: "empty"), label: nil, ttlSeconds: nil).id
            core.registry.close()
        }
        let again = try CoreServices(scratch) { $0.sync = "off" }
        XCTAssertNil(again.registry.lifecycle.state(of: ids.staging), "staging: none")
        XCTAssertNil(again.registry.lifecycle.state(of: ids.ready), "ready: none")
        XCTAssertEqual(again.registry.lifecycle.state(of: ids.live), .live, "live: live again")
    }
}
