import FileSystem
import Foundation
import Platform
@testable import LarderCore
import Synchronization
import TestSupport
import XCTest

/// The stores' records in one journal of lines: what a restart finds, what
/// a crash mid-write leaves, a root of an earlier version, a journal that
/// grows, and rewrites racing with stores being made.
final class RecordJournalTests: XCTestCase {
    func lines(_ root: String) throws -> [String] {
        try String(contentsOfFile: root + "/stores.journal", encoding: .utf8).split(separator: "\n").map(String.init)
    }

    func testARestartFindsEachStoresLastRecordAndKeepsTheLiveOnly() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch, readyCopies: 2)
        let root = core!.registry.root
        let kept = try core!.store("gallery", fixtures: ["artists", "artworks"], label: "first")
        let doomed = try core!.store("boardgames", label: "doomed")
        let made = try core!.store("gallery", label: "made")
        _ = try core!.registry.update(kept.id, .init(keep: .forever, label: .some("renamed")))
        try core!.registry.delete(doomed.id)
        XCTAssertEqual(try lines(root).count, 4, "three stores and one change, and no line for a deletion")
        XCTAssertEqual(FileSystem.permissions(root + "/stores.journal"), 0o600, "ids are the tests' keys: the records are the server's alone")
        XCTAssertFalse(FileSystem.exists(kept.directory + "/store.json"), "no file beside the store")
        core!.registry.close()
        core = nil

        let again = try CoreServices(scratch, readyCopies: 2)
        XCTAssertEqual(try again.registry.list().stores.map(\.id), [made.id, kept.id])
        let found = try again.registry.get(kept.id).record
        XCTAssertEqual(found.label, "renamed")
        XCTAssertTrue(found.keptForever)
        XCTAssertEqual(found.fixtures, ["artists", "artworks"])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: try again.registry.get(kept.id).lastCounts ?? [])["artworks"], 12)
        XCTAssertLarderError(.storeNotFound, try again.registry.get(doomed.id))
        XCTAssertEqual(try lines(root).count, 2, "rewritten at start: one line per live store")
        XCTAssertEqual(readyCopyDirectories(root), [], "the ready copies of the last run are gone")
        // Sequences go on from the last store's.
        let next = try again.store("boardgames")
        XCTAssertGreaterThan(next.record.sequence, made.record.sequence)

        // A journal already one line a live store is appended to as it is, not rewritten.
        func inode() throws -> Int { try FileManager.default.attributesOfItem(atPath: root + "/stores.journal")[.systemFileNumber] as! Int }
        let before = try inode()
        again.registry.close()
        let third = try CoreServices(scratch)
        XCTAssertEqual(try inode(), before)
        XCTAssertEqual(third.registry.count, 3)
        _ = try third.store("boardgames")
        XCTAssertEqual(try lines(root).count, 4)
    }

    /// A restart reads the journal a piece at a time (a journal of
    /// hundreds of MiB once took as much memory): read in pieces of a few
    /// bytes it finds what it finds read whole, across every cut, with a
    /// torn line in the middle and a last line without its end.
    func testTheJournalIsReadInPiecesAsItIsReadWhole() throws {
        let scratch = Scratch()
        let path = scratch.path + "/stores.journal"
        var text = ""
        for n in 0..<40 {
            let record = StoreRecord(id: "st_\(n % 7)", sequence: Int64(n), label: String(repeating: "x", count: n), createdAt: .now, expiresAt: .now)
            text += String(decoding: record.serialized(), as: UTF8.self) + "\n"
            if n == 20 { text += #"{"id":"st_torn","seq"# + "\n" }
        }
        text += #"{"id":"st_last","sequence":99"#
        try FileSystem.writeFile(Array(text.utf8), to: path)
        let whole = RecordJournal.read(path, pieceBytes: 1 << 20)
        XCTAssertEqual(whole.records.count, 7)
        XCTAssertEqual(whole.lines, 42)
        XCTAssertFalse(whole.whole)
        for piece in [1, 7, 64, 333] {
            let pieces = RecordJournal.read(path, pieceBytes: piece)
            XCTAssertEqual(pieces.lines, whole.lines, "pieces of \(piece)")
            XCTAssertEqual(pieces.whole, whole.whole)
            XCTAssertEqual(pieces.records.mapValues(\.label), whole.records.mapValues(\.label), "pieces of \(piece): the last record of each id wins")
        }
        try FileSystem.writeAtomically(Array(text.utf8.prefix(text.utf8.count - #"{"id":"st_last","sequence":99"#.utf8.count)), to: path)
        let clean = RecordJournal.read(path, pieceBytes: 5)
        XCTAssertEqual(clean.lines, 41)
        XCTAssertFalse(clean.whole, "the torn line in the middle")
    }

    /// A crash mid-append leaves half a line: it is skipped, and the
    /// journal is rewritten whole before anything is appended after it.
    func testATornLastLineIsSkippedAndNeverJoinsTheNextRecord() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch)
        let root = core!.registry.root
        let store = try core!.store("boardgames", label: "whole")
        core!.registry.close()
        core = nil
        let journal = try XCTUnwrap(FileHandle(forWritingAtPath: root + "/stores.journal"))
        journal.seekToEndOfFile()
        journal.write(Data(#"{"id":"st_torn","sequence":9,"label":"hal"#.utf8))
        journal.closeFile()

        let again = try CoreServices(scratch)
        XCTAssertEqual(try again.registry.list().stores.map(\.id), [store.id])
        let later = try again.store("boardgames", label: "later")
        again.registry.close()
        let third = try CoreServices(scratch)
        XCTAssertEqual(try third.registry.list().stores.map(\.record.label), ["later", "whole"])
        XCTAssertEqual(third.registry.count, 2)
        XCTAssertEqual(try third.registry.get(later.id).record.label, "later")
    }

    /// An append that fails part way (here the file size limit, as a full
    /// disk would) leaves half a line; the next record starts a line of
    /// its own and is found after a restart.
    func testAFailedAppendNeverSwallowsTheNextRecord() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch)
        let root = core!.registry.root
        let first = try core!.store("boardgames", label: "first")
        let size = try FileManager.default.attributesOfItem(atPath: root + "/stores.journal")[.size] as! Int
        signal(SIGXFSZ, SIG_IGN)
        defer { signal(SIGXFSZ, SIG_DFL) }
        var saved = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &saved)
        var tight = saved
        tight.rlim_cur = rlim_t(size + 20)
        setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &tight)
        XCTAssertThrowsError(try core!.registry.update(first.id, .init(label: .some("never saved"))))
        setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &saved)
        _ = try core!.registry.update(first.id, .init(label: .some("saved")))
        core!.registry.close()
        core = nil

        let again = try CoreServices(scratch)
        XCTAssertEqual(try again.registry.get(first.id).record.label, "saved")
    }

    /// A root an earlier version left: a `store.json` beside each store and
    /// no journal. Its stores are found, their records move to the journal.
    func testARootOfAnEarlierVersionKeepsItsStores() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch)
        let root = core!.registry.root
        let store = try core!.store("gallery", fixtures: ["artists"], label: "older")
        let record = try core!.registry.get(store.id).savedRecord
        core!.registry.close()
        core = nil
        try FileSystem.writeFile(record.serialized(), to: store.directory + "/store.json")
        FileSystem.remove(root + "/stores.journal")

        let again = try CoreServices(scratch)
        XCTAssertEqual(try again.registry.get(store.id).record.label, "older")
        XCTAssertEqual(try again.registry.get(store.id).record.fixtures, ["artists"])
        XCTAssertFalse(FileSystem.exists(store.directory + "/store.json"))
        XCTAssertEqual(journaledIDs(root), [store.id])
    }

    func testAGrowingJournalIsRewrittenWithTheLiveRecords() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let root = core.registry.root
        let store = try core.store("boardgames")
        let changes = 2 * RecordJournal.minimumLines
        for n in 0..<changes {
            _ = try core.registry.update(store.id, .init(label: .some("label \(n)")))
        }
        let deadline = Date().addingTimeInterval(10)
        while try lines(root).count > RecordJournal.minimumLines, Date() < deadline { usleep(10_000) }
        XCTAssertLessThanOrEqual(try lines(root).count, RecordJournal.minimumLines, "rewritten in the background")
        XCTAssertEqual(journaledIDs(root), [store.id])
        core.registry.close()
        let again = try CoreServices(scratch)
        XCTAssertEqual(try again.registry.get(store.id).record.label, "label \(changes - 1)")
    }

    /// One store's churn cannot grow the journal past a bound: a record
    /// holds at most `StoreRecord.maxFixtures` fixture names (the rest is
    /// refused, saying so), and the journal is rewritten once its bytes,
    /// not only its lines, have grown to several times what is live.
    func testOneStoresChurnKeepsTheJournalSmall() throws {
        let scratch = Scratch()
        // A fixture that loads again and again (no fixed ids).
        let fixtures = scratch.path + "/fixtures"
        try FileSystem.makeDirectories(fixtures + "/notes/migrations")
        try FileSystem.makeDirectories(fixtures + "/notes/data")
        try FileSystem.writeFile(Array("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);\n".utf8), to: fixtures + "/notes/migrations/1_init.sql")
        try FileSystem.writeFile(Array("INSERT INTO notes (body) VALUES ('n');\n".utf8), to: fixtures + "/notes/data/artists.sql")
        let core = try CoreServices(scratch, fixtures: fixtures)
        let root = core.registry.root
        let store = try core.store("notes", fixtures: [])
        let many = [String](repeating: "artists", count: StoreRecord.maxFixtures + 1)
        XCTAssertLarderError(.badRequest, try core.editor.loadFixtures(store.id, .names(many)))
        XCTAssertEqual(try core.registry.get(store.id).record.fixtures, [], "refused whole")
        var request = Provisioner.Request()
        request.template = "notes"
        request.fixtures = many
        XCTAssertLarderError(.badRequest, try core.provisioner.plan(request))
        // As many loads as a record holds, then labels of the longest, again and again.
        let half = [String](repeating: "artists", count: StoreRecord.maxFixtures / 2)
        _ = try core.editor.loadFixtures(store.id, .names(half))
        _ = try core.editor.loadFixtures(store.id, .names(half))
        XCTAssertLarderError(.badRequest, try core.editor.loadFixtures(store.id, .names(["artists"])))
        let label = String(repeating: "x", count: StoreRecord.maxLabelBytes)
        let recordBytes = try core.registry.get(store.id).record.serialized().count
        for n in 0..<400 {
            _ = try core.registry.update(store.id, .init(label: .some(label.dropLast(n % 10) + "")))
        }
        let deadline = Date().addingTimeInterval(10)
        func size() -> Int64 { FileSystem.size(root + "/stores.journal") }
        while size() > Int64(RecordJournal.minimumBytes + 4 * recordBytes), Date() < deadline { usleep(10_000) }
        XCTAssertLessThanOrEqual(size(), Int64(RecordJournal.minimumBytes + 4 * recordBytes),
                                 "400 changes of a \(recordBytes)-byte record")
        core.registry.close()
        let again = try CoreServices(scratch)
        XCTAssertEqual(try again.registry.get(store.id).record.fixtures.count, StoreRecord.maxFixtures)
    }

    /// Stores made and deleted on several threads while the journal is
    /// rewritten again and again: every live store's record survives.
    func testRewritesRacingWithNewStoresLoseNoRecord() throws {
        let scratch = Scratch()
        var core: CoreServices? = try CoreServices(scratch, readyCopies: 4)
        let registry = core!.registry, provisioner = core!.provisioner
        let made = Mutex<[String]>([])
        let stop = Atomic<Bool>(false)
        let rewriter = Thread {
            while !stop.load(ordering: .relaxed) {
                try? registry.lifecycle.journal.rewrite { registry.lifecycle.live.withLock { $0.stores.all }.map(\.savedRecord) }
            }
        }
        rewriter.start()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for n in 0..<60 {
                var request = Provisioner.Request()
                request.template = n % 2 == 0 ? "boardgames" : "gallery"
                guard let store = try? provisioner.create(provisioner.plan(request), label: "w\(worker)", ttlSeconds: nil).0 else { continue }
                if n % 3 == 0 { try? registry.delete(store.id) } else { made.withLock { $0.append(store.id) } }
            }
        }
        stop.store(true, ordering: .relaxed)
        while !rewriter.isFinished { usleep(1_000) }
        let live = made.withLock { $0 }
        XCTAssertEqual(live.count, 160)
        registry.close()
        core = nil

        let again = try CoreServices(scratch)
        XCTAssertEqual(Set(try again.registry.list(limit: 1000).stores.map(\.id)), Set(live))
    }
}
