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

    /// What a test planted in its store's directory (links under the
    /// store's own file names, to files and folders outside; folders of its
    /// own) goes with it, and nothing outside does.
    func testWhatATestPlantedGoesWithItsStoreAndNothingOutside() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery")
        let outside = scratch.write(["keep": "precious", "folder/inner": "also"], under: "outside")
        let directory = store.directory
        FileSystem.remove(directory + "/store.sqlite-wal")
        XCTAssertEqual(symlink(outside + "/keep", directory + "/store.sqlite-wal"), 0)
        XCTAssertEqual(symlink(outside + "/folder", directory + "/escape"), 0)
        scratch.write(["deeper/file": "x"], under: String(directory.dropFirst(scratch.path.count + 1)) + "/junk")
        core.registry.trash.pause()
        try core.registry.delete(store.id)
        let trashed = core.registry.root + "/trash/" + store.id
        XCTAssertTrue(FileSystem.isDirectory(trashed))
        core.registry.trash.resume()
        core.registry.drainTrash()
        XCTAssertEqual(FileSystem.entries(core.registry.root + "/trash"), [])
        XCTAssertEqual(try FileSystem.readFile(outside + "/keep"), Array("precious".utf8))
        XCTAssertEqual(FileSystem.entries(outside + "/folder"), ["inner"])
    }

    /// Without a quota a DELETE takes no sizes: the trash measures the files
    /// before it removes them, and the ledger ends where a recount would.
    func testTheTrashMeasuresWhatADeleteDidNotCount() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let kept = try core.store("gallery", fixtures: ["artists", "artworks"])
        let doomed = try core.store("gallery", fixtures: ["artists", "artworks"])
        _ = try core.editor.loadFixtures(doomed.id, .sql("INSERT INTO artists (name) VALUES (randomblob(50000))"))
        let before = core.registry.diskBytes, cost = doomed.diskCost
        XCTAssertGreaterThan(cost, 50_000)
        core.registry.trash.pause()
        try core.registry.delete(doomed.id)
        XCTAssertEqual(core.registry.diskBytes, before, "counted as the live stores' until the trash measures it")
        core.registry.trash.resume()
        core.registry.drainTrash()
        XCTAssertEqual(core.registry.diskBytes, before - cost)
        XCTAssertEqual(core.registry.refreshDiskUsage(), kept.diskCost)
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

    /// The attack of a hostile test: it fills a sub-directory of its store
    /// with files and, while the server removes them, swaps that directory
    /// for a link to another place whose files have the same names. A walk
    /// that re-resolves paths deletes the other place's files; removal by
    /// descriptor removes the link and the test's own files only.
    func testRemovingATreeNeverFollowsADirectorySwappedForALink() throws {
        let scratch = Scratch()
        let root = scratch.path + "/root"
        let outside = scratch.path + "/precious"
        try FileSystem.makeDirectories(outside)
        let count = 1000
        for i in 0..<count { try FileSystem.writeFile([1], to: outside + "/f\(i)") }
        for round in 0..<3 {
            let store = root + "/trash/st_\(round)"
            try FileSystem.makeDirectories(store + "/big")
            for i in 0..<count { try FileSystem.writeFile([2], to: store + "/big/f\(i)") }
            let swapped = Flag()
            let swapper = Thread {
                // Once the removal has begun, swap the directory for a link.
                // (Directories list in creation order or its reverse: one end goes first.)
                while FileSystem.exists(store + "/big/f0") && FileSystem.exists(store + "/big/f\(count - 1)") { usleep(50) }
                if rename(store + "/big", store + "/big-moved") == 0, symlink(outside, store + "/big") == 0 { swapped.set() }
            }
            swapper.start()
            XCTAssertNoThrow(try FileSystem.removeTree(store, within: root))
            while !swapper.isFinished { usleep(1000) }
            XCTAssertFalse(FileSystem.exists(store), "round \(round): the whole tree is gone")
            XCTAssertEqual(FileSystem.entries(outside).count, count, "round \(round) (swapped: \(swapped.value)): nothing outside the tree was removed")
        }
    }

    /// A tree deeper than the walk holds descriptors for is removed too.
    func testAVeryDeepTreeIsRemoved() throws {
        let scratch = Scratch()
        let root = scratch.path + "/root"
        var path = root + "/trash/st_deep"
        try FileSystem.makeDirectories(path)
        let top = path
        for i in 0..<300 {
            path += "/d"
            try FileSystem.makeDirectory(path)
            if i % 50 == 0 { try FileSystem.writeFile([1], to: path + "/f") }
        }
        try FileSystem.removeTree(top, within: root)
        XCTAssertFalse(FileSystem.exists(top))
    }
}
