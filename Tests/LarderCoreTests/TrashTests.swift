import FileSystem
import Foundation
@testable import LarderCore
import TestSupport
import XCTest

/// Deletion off the request path: one rename into `trash/`, the files
/// removed in the background, whatever a stop left there removed at start.
final class TrashTests: XCTestCase {
    func testADeletedStoreIsGoneAtOnceWhileTheTrashIsBehind() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let first = try core.store("gallery", label: "suite")
        let second = try core.store("gallery", label: "suite")
        let trash = core.registry.root + "/trash"
        core.registry.trash.pause()
        try core.registry.delete(first.id)
        // Gone from every answer, though its files are not removed yet.
        XCTAssertLarderError(.storeNotFound, try core.registry.get(first.id))
        XCTAssertEqual(try core.registry.list().stores.map(\.id), [second.id])
        XCTAssertEqual(core.registry.count, 1)
        XCTAssertFalse(FileSystem.exists(first.directory))
        XCTAssertEqual(FileSystem.entries(trash), [first.id])
        XCTAssertEqual(core.registry.trashBacklog, 1)
        // The server goes on meanwhile: new stores, more deletions.
        let third = try core.store("boardgames")
        XCTAssertEqual(core.registry.deleteAll(label: "suite"), 1)
        XCTAssertEqual(core.registry.trashBacklog, 2)
        XCTAssertEqual(try core.registry.list().stores.map(\.id), [third.id])
        core.registry.trash.resume()
        core.registry.drainTrash()
        XCTAssertEqual(core.registry.trashBacklog, 0)
        XCTAssertEqual(FileSystem.entries(trash), [])
    }

    func testARestartRemovesWhatTheTrashStillHeld() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch)
        let kept = try core!.store("boardgames")
        let doomed = try core!.store("gallery")
        let root = core!.registry.root
        // As a crash leaves it: a store moved into the trash, its files still there,
        // and a stray file of a removal cut short.
        try FileSystem.rename(doomed.directory, to: root + "/trash/" + doomed.id)
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/trash/" + doomed.id + "/store.sqlite-journal", contents: Data([1])))
        core!.registry.close()
        core = nil

        let again = try CoreServices(scratch)
        again.registry.drainTrash()
        XCTAssertEqual(FileSystem.entries(root + "/trash"), [])
        XCTAssertEqual(try again.registry.list().stores.map(\.id), [kept.id], "a store in the trash is never found again")
        XCTAssertLarderError(.storeNotFound, try again.registry.get(doomed.id))
    }
}
