import FileSystem
import Foundation
@testable import LarderCore
import SQLite
import TestSupport
import Synchronization
import XCTest

/// `reset` (StoreEditor) and forks (Provisioner.createFork): the creation
/// state each store keeps, restored in place under a test's open connection.
final class ResetAndForkTests: XCTestCase {
    func inode(_ path: String) throws -> UInt64 {
        (try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    func count(_ db: Connection, _ table: String) throws -> Int64? {
        try db.scalar("SELECT count(*) FROM \(table)")?.int64
    }

    /// A read that fails because the store's files changed under the
    /// server (SQLITE_IOERR_SHORT_READ, 522) is the contract's sql_error that
    /// says to reset, and a reset mends it; a full disk stays insufficient_storage.
    func testAnIOErrorOnAStoreIsAStoreErrorThatAResetMends() {
        let shortRead = SQLiteError(code: 522, message: "disk I/O error", statement: "SELECT count(*) FROM \"t\"")
        let error = LarderError.classify(shortRead)
        XCTAssertEqual(error?.code, .sqlError)
        XCTAssertTrue(error?.message.contains("cannot be read as it is") == true, error?.message ?? "")
        XCTAssertTrue(error?.message.contains("reset the store") == true)
        XCTAssertTrue(Store.isDamage(shortRead))
        XCTAssertNil(LarderError.classify(SQLiteError(code: 1, message: "no such table: t")))
    }

    func testResetRestoresTheCreationStateInPlaceUnderATestsOpenConnection() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", version: "3", fixtures: ["artists", "artworks"])
        let path = store.databasePath
        let before = try inode(path)
        // The test's own connection, open across the reset.
        let held = try Connection(path: path, mode: .readWrite)
        try held.execute("DELETE FROM artworks; INSERT INTO artists (name) VALUES ('Sonia Delaunay'); CREATE TABLE scratch (x)")
        _ = try core.editor.loadFixtures(store.id, .names(["albums"]))
        _ = try core.editor.migrate(store.id, to: "latest")
        XCTAssertEqual(store.record.version, "6")
        XCTAssertNotNil(try held.scalar("SELECT name FROM sqlite_schema WHERE name = 'partners'"))

        let reset = try core.editor.reset(store.id)
        XCTAssertEqual(try inode(path), before, "the same file")
        XCTAssertEqual(reset.record.version, "3")
        XCTAssertEqual(reset.record.fixtures, ["artists", "artworks"])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: reset.lastCounts ?? [])["artworks"], 12)
        // The held connection sees the reset state at its next transaction, and writes on.
        XCTAssertEqual(try count(held, "artworks"), 12)
        XCTAssertEqual(try count(held, "artists"), 4)
        XCTAssertNil(try held.scalar("SELECT name FROM sqlite_schema WHERE name = 'scratch'"))
        XCTAssertNil(try held.scalar("SELECT name FROM sqlite_schema WHERE name = 'partners'"), "the schema of version 3 again")
        try held.execute("INSERT INTO artists (name) VALUES ('after the reset')")
        XCTAssertEqual(try store.counts().first { $0.0 == "artists" }?.1, 5)
        // The record on disk says so too: a restart finds the creation state again.
        core.registry.close()
        let again = try CoreServices(scratch)
        XCTAssertEqual(try again.registry.get(store.id).record.fixtures, ["artists", "artworks"])
        _ = try again.editor.reset(store.id)
        XCTAssertEqual(try count(held, "artists"), 4)
    }

    /// A store its test locked for good (`locking_mode=EXCLUSIVE`): a fork
    /// and a snapshot wait the busy timeout, then conflict; a DELETE ends a
    /// copy that waits.
    func testCopiesOfAStoreLockedForGoodConflictAndDeleteEndsThem() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.readTimeoutMs = 300 }
        let store = try core.store("gallery")
        let holder = try Connection(path: store.databasePath, mode: .readWrite)
        try holder.execute("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO albums (title) VALUES ('held');")
        var started = Date()
        // As the server answers them: 409 conflict.
        func conflicts(_ work: () throws -> Void) {
            XCTAssertThrowsError(try work()) { XCTAssertEqual(LarderError.classify($0)?.code, .conflict, "\($0)") }
        }
        conflicts { _ = try core.provisioner.createFork(of: store.id, fixtures: nil, label: nil, ttlSeconds: nil) }
        conflicts { _ = try DatabaseSnapshot(store: core.registry.get(store.id), temporaryDirectory: scratch.path) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)

        let patientScratch = Scratch()
        let patient = try CoreServices(patientScratch) { $0.readTimeoutMs = 60_000; $0.busyTimeoutMs = 60_000 }
        let other = try patient.store("gallery")
        let otherHolder = try Connection(path: other.databasePath, mode: .readWrite)
        try otherHolder.execute("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO albums (title) VALUES ('held');")
        started = Date()
        let registry = patient.registry, doomed = other.id
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) { try? registry.delete(doomed) }
        XCTAssertLarderError(.storeNotFound, try patient.provisioner.createFork(of: other.id, fixtures: nil, label: nil, ttlSeconds: nil))
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        try holder.execute("ROLLBACK")
        try otherHolder.execute("ROLLBACK")
    }

    func testATemplateStoresBaseIsALinkToTheImmutableCacheFile() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery")
        let base = store.directory + "/base.sqlite"
        let entries = FileSystem.entries(core.registry.layout.cache).filter { $0.hasSuffix(".sqlite") }
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(try inode(base), try inode(core.registry.layout.cache + "/" + entries[0]), "no bytes copied")
        let mode = (try FileManager.default.attributesOfItem(atPath: base)[.posixPermissions] as? NSNumber)?.intValue
        XCTAssertEqual(mode, 0o444, "read-only")
        // A reset leaves nothing beside the base (it is read as immutable: no -wal, no -shm).
        _ = try core.editor.reset(store.id)
        XCTAssertEqual(FileSystem.entries(store.directory).filter { $0.hasPrefix("base") }, ["base.sqlite"])
    }

    func testAResetWaitsForATestsWriteTransactionThenConflicts() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.busyTimeoutMs = 100 }
        let store = try core.store("boardgames", fixtures: ["board_games"])
        let held = try Connection(path: store.databasePath, mode: .readWrite)
        try held.execute("BEGIN IMMEDIATE; DELETE FROM board_games")
        XCTAssertLarderError(.conflict, try core.editor.reset(store.id))
        try held.execute("COMMIT")
        XCTAssertEqual(try count(held, "board_games"), 0)
        _ = try core.editor.reset(store.id)
        XCTAssertGreaterThan(try count(held, "board_games") ?? 0, 0)
    }

    func testResetOfAnEmptyStoreAndOfAnUpload() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let (empty, _) = try core.provisioner.createEmpty(label: nil, ttlSeconds: nil)
        let held = try Connection(path: empty.databasePath, mode: .readWrite)
        try held.execute("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x')")
        _ = try core.editor.reset(empty.id)
        XCTAssertEqual(try held.scalar("SELECT count(*) FROM sqlite_schema")?.int64, 0)

        let upload = try scratch.database("upload.sqlite")
        try upload.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: scratch.path + "/upload.sqlite")))
        let (uploaded, _) = try core.provisioner.createFromUpload(.bytes(bytes), template: nil, version: nil, label: nil, ttlSeconds: nil)
        let test = try Connection(path: uploaded.databasePath, mode: .readWrite)
        try test.execute("DELETE FROM t WHERE x > 1; INSERT INTO t VALUES (9)")
        _ = try core.editor.reset(uploaded.id)
        XCTAssertEqual(try rows(test, "SELECT x FROM t ORDER BY x"), [["1"], ["2"], ["3"]])
    }

    /// Forks and snapshots copy the store's files while its test writes:
    /// every copy must be one committed state. The test moves money between
    /// accounts (the total never changes) and logs each move with a
    /// counter, checkpointing every few pages, so checkpoints write into
    /// the file while it is copied; in WAL mode and in rollback-journal mode.
    func testCopiesAreOneCommittedStateWhileTheTestWrites() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        for mode in ["WAL", "DELETE"] {
            let (store, _) = try core.provisioner.createEmpty(label: nil, ttlSeconds: nil)
            let setup = try Connection(path: store.databasePath, mode: .readWrite)
            try setup.execute("""
                PRAGMA journal_mode=\(mode);
                CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
                CREATE TABLE moves (id INTEGER PRIMARY KEY, body BLOB);
                CREATE TABLE meta (n INTEGER NOT NULL); INSERT INTO meta VALUES (0);
                WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < 100) INSERT INTO accounts SELECT x, 100 FROM i;
                WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < 300) INSERT INTO moves (body) SELECT randomblob(8000) FROM i;
                UPDATE meta SET n = 300;
                """)
            let stop = Latch()
            let writes = Mutex(0)
            let writer = Thread {
                guard let db = try? Connection(path: store.databasePath, mode: .readWrite, busyTimeoutMs: 10_000) else { return }
                try? db.execute("PRAGMA wal_autocheckpoint=8")
                var i = 0
                while !stop.isSet {
                    i += 1
                    let from = i % 100 + 1, to = (i * 7) % 100 + 1
                    let sql = "BEGIN IMMEDIATE; UPDATE accounts SET balance = balance - 3 WHERE id = \(from); "
                        + "UPDATE accounts SET balance = balance + 3 WHERE id = \(to); INSERT INTO moves (body) VALUES (randomblob(\(500 + i % 9000))); "
                        + "UPDATE meta SET n = n + 1; COMMIT;"
                    if (try? db.execute(sql)) != nil { writes.withLock { $0 += 1 } } else { try? db.execute("ROLLBACK") }
                    if i % 50 == 0 { try? db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
                }
            }
            writer.start()
            defer { stop.set() }
            func check(_ path: String, _ what: String) throws {
                let copy = try Connection(path: path, mode: .readOnly)
                XCTAssertEqual(try copy.scalar("PRAGMA integrity_check")?.string, "ok", "\(mode) \(what)")
                XCTAssertEqual(try copy.scalar("SELECT sum(balance) FROM accounts")?.int64, 10_000, "\(mode) \(what)")
                XCTAssertEqual(try copy.scalar("SELECT count(*) FROM moves")?.int64, try copy.scalar("SELECT n FROM meta")?.int64, "\(mode) \(what)")
            }
            for round in 0..<12 {
                let fork = try untilNoConflict { try core.provisioner.createFork(of: store.id, fixtures: nil, label: nil, ttlSeconds: nil).0 }
                // (The diff waits for the base, which a store this large has copied after the answer.)
                XCTAssertTrue(try fork.diff().tables.isEmpty, "the fork and its base are the same state")
                XCTAssertEqual(FileSystem.entries(fork.directory), ["base.sqlite", "store.sqlite"], "counted without a -wal or -shm")
                try check(fork.databasePath, "fork \(round)")
                let counted = Dictionary(uniqueKeysWithValues: fork.lastCounts ?? [])
                XCTAssertEqual(counted["moves"], try Connection(path: fork.databasePath, mode: .readOnly).scalar("SELECT count(*) FROM moves")?.int64)
                try check(fork.directory + "/base.sqlite", "fork's base \(round)")
                XCTAssertFalse(FileSystem.exists(fork.databasePath + "-wal") && FileSystem.size(fork.databasePath + "-wal") > 0)
                let snapshot = try untilNoConflict { try DatabaseSnapshot(store: store, temporaryDirectory: scratch.path) }
                let file = scratch.path + "/snapshot-\(mode)-\(round).sqlite"
                var bytes: [UInt8] = []
                while bytes.count < snapshot.size { bytes += try snapshot.read(count: 1 << 20, at: UInt64(bytes.count)) }
                try FileSystem.writeFile(bytes, to: file)
                try check(file, "snapshot \(round)")
            }
            stop.set()
            while !writer.isFinished { Thread.sleep(forTimeInterval: 0.01) }
            XCTAssertGreaterThan(writes.withLock { $0 }, 20, "the test wrote while the copies were made")
        }
    }

    /// A fork takes its counts from the source, read beside the copy, only
    /// when they are the copy's state. The source's test commits a row and
    /// truncates its WAL, over and over: most forks begin with an empty WAL
    /// that the next commit fills while the file is copied, and that copy's
    /// counts must then be its own.
    func testAForksCountsAreItsOwnWhileItsSourceCommitsAndTruncates() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try largeStore(core, megabytes: 8)
        let stop = Latch()
        let commits = Mutex(0)
        let writer = Thread {
            guard let db = try? Connection(path: source.databasePath, mode: .readWrite, busyTimeoutMs: 10_000) else { return }
            while !stop.isSet {
                guard (try? db.execute("INSERT INTO big (body) VALUES (randomblob(100))")) != nil else { continue }
                commits.withLock { $0 += 1 }
                _ = try? db.execute("PRAGMA busy_timeout = 0; PRAGMA wal_checkpoint(TRUNCATE); PRAGMA busy_timeout = 10000")
            }
        }
        writer.start()
        defer { stop.set() }
        for round in 0..<60 {
            let (fork, provenance) = try core.provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: 60)
            let counted = Dictionary(uniqueKeysWithValues: provenance.counts ?? [])
            let copy = try Connection(path: fork.databasePath, mode: .readOnly)
            XCTAssertEqual(counted["big"], try count(copy, "big"), "round \(round)")
            XCTAssertEqual(counted["artworks"], 12)
            try core.registry.delete(fork.id)
        }
        stop.set()
        while !writer.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertGreaterThan(commits.withLock { $0 }, 60, "the source's test wrote while it was forked")
    }

    /// A fork answers its source's counts without counting again while the
    /// source is as they were read (a 1 GB store forked in a millisecond),
    /// and counts again after any commit: in rollback-journal mode with the
    /// file's size unchanged, in WAL mode with the connection held (its
    /// frames still in the WAL) or closed (folded into the file), written
    /// at once after the hand-out, within a clock tick of the copy.
    func testAForkReusesItsSourcesCountsOnlyWhileNothingCommitted() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        func artworks(_ counts: [(String, Int64)]?) -> Int64? { Dictionary(uniqueKeysWithValues: counts ?? [])["artworks"] }
        func fork(_ store: Store) throws -> Int64? {
            let (fork, provenance) = try core.provisioner.createFork(of: store.id, fixtures: nil, label: nil, ttlSeconds: 60)
            let copied = try count(Connection(path: fork.databasePath, mode: .readOnly), "artworks")
            XCTAssertEqual(artworks(provenance.counts), copied, "the answer's counts are the copy's")
            try core.registry.delete(fork.id)
            return copied
        }
        let store = try core.store("gallery", fixtures: ["artists", "artworks"])
        XCTAssertTrue(store.hasExactCounts, "a hand-out knows its counts")
        XCTAssertEqual(try fork(store), 12)
        XCTAssertEqual(try fork(store), 12)

        // Written at once: the copy's time was set back, so this write moves it.
        let rollback = try core.store("gallery", fixtures: ["artists", "artworks"])
        let test = try Connection(path: rollback.databasePath, mode: .readWrite)
        try test.execute("PRAGMA journal_mode=DELETE; DELETE FROM artworks WHERE id = (SELECT min(id) FROM artworks)")
        XCTAssertEqual(try fork(rollback), 11)
        try test.execute("DELETE FROM artworks WHERE id = (SELECT min(id) FROM artworks)")
        XCTAssertEqual(try fork(rollback), 10, "the same size, another change counter")

        let wal = try core.store("gallery", fixtures: ["artists", "artworks"])
        var held: Connection? = try Connection(path: wal.databasePath, mode: .readWrite)
        try held?.execute("DELETE FROM artworks WHERE id = (SELECT min(id) FROM artworks)")
        XCTAssertEqual(try fork(wal), 11, "its frames in the WAL")
        try held?.execute("DELETE FROM artworks WHERE id = (SELECT min(id) FROM artworks)")
        held = nil
        XCTAssertEqual(try fork(wal), 10, "folded into the file")
        for round in 0..<20 {
            try Connection(path: wal.databasePath, mode: .readWrite).execute("INSERT INTO artworks (title, artist_id) VALUES ('r\(round)', 1)")
            XCTAssertEqual(try fork(wal), 11 + Int64(round), "round \(round)")
        }
    }

    /// A reset answers the base's counts without counting again, as long
    /// as the base is the file they were read from: a test that puts
    /// another database in its place gets that one's counts.
    func testAResetCountsAgainWhenTheBaseIsAnotherFile() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let upload = try scratch.database("upload.sqlite")
        try upload.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: scratch.path + "/upload.sqlite")))
        let (store, _) = try core.provisioner.createFromUpload(.bytes(bytes), template: nil, version: nil, label: nil, ttlSeconds: nil)
        let test = try Connection(path: store.databasePath, mode: .readWrite)
        for _ in 0..<3 {
            try test.execute("INSERT INTO t VALUES (4)")
            XCTAssertEqual(try core.editor.reset(store.id).lastCounts?.first?.1, 3)
        }
        // Another database where the base was (a plain file of the store's own).
        let other = try scratch.database("other.sqlite")
        try other.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3), (4), (5), (6), (7)")
        let otherPath = scratch.path + "/other.sqlite"
        XCTAssertEqual(unlink(store.directory + "/base.sqlite"), 0)
        try FileSystem.copyFile(from: otherPath, to: store.directory + "/base.sqlite")
        XCTAssertEqual(try core.editor.reset(store.id).lastCounts?.first?.1, 7)
        XCTAssertEqual(try test.scalar("SELECT count(*) FROM t")?.int64, 7)
    }

    func testAStoreWithoutABaseSaysItCannotBeReset() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("boardgames")
        // As an older Larder left it: no base beside the store.
        unlink(store.directory + "/base.sqlite")
        XCTAssertLarderError(.badRequest, try core.editor.reset(store.id)) { error in
            XCTAssertTrue(error.message.contains("no creation state"), error.message)
        }
        XCTAssertLarderError(.storeNotFound, try core.editor.reset("st_missing"))
        // A base a test replaced by a link to another store is not followed.
        let other = try core.store("gallery")
        XCTAssertEqual(symlink(other.databasePath, store.directory + "/base.sqlite"), 0)
        XCTAssertLarderError(.badRequest, try core.editor.reset(store.id))
        XCTAssertThrowsError(try Connection.immutable(path: store.directory + "/base.sqlite")) { error in
            XCTAssertEqual((error as? SQLiteError)?.code, 1550, "SQLITE_CANTOPEN_SYMLINK")
        }
        XCTAssertNil(try store.withReader { try $0.scalar("SELECT name FROM sqlite_schema WHERE name = 'artists'") })
    }

    func testAForkIsTheSourcesCommittedStateThenItsFixtures() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try core.store("gallery", fixtures: ["artists", "artworks"], label: "expensive setup")
        let test = try Connection(path: source.databasePath, mode: .readWrite)
        try test.execute("INSERT INTO artists (name) VALUES ('committed')")
        // The source's test is writing: its open transaction is not in the fork.
        try test.execute("BEGIN IMMEDIATE; INSERT INTO artists (name) VALUES ('not committed'); DELETE FROM artworks")
        let (fork, provenance) = try core.provisioner.createFork(of: source.id, fixtures: ["albums"], label: "forked", ttlSeconds: 60)
        try test.execute("COMMIT")

        XCTAssertNotEqual(fork.id, source.id)
        XCTAssertEqual(fork.record.template, "gallery")
        XCTAssertEqual(fork.record.version, "6")
        XCTAssertEqual(fork.record.fixtures, ["artists", "artworks", "albums"])
        XCTAssertEqual(fork.record.label, "forked")
        let counts = Dictionary(uniqueKeysWithValues: provenance.counts ?? [])
        XCTAssertEqual(counts["artists"], 5)
        XCTAssertEqual(counts["artworks"], 12)
        XCTAssertGreaterThan(counts["albums"] ?? 0, 0)
        let db = try fork.connect()
        XCTAssertEqual(try db.scalar("PRAGMA journal_mode")?.string, "wal")
        XCTAssertEqual(try rows(db, "SELECT name FROM artists WHERE name LIKE '%committed'"), [["committed"]])

        // A reset of the fork goes back to the fork, not to the template.
        try db.execute("DELETE FROM artists WHERE id > 2")
        _ = try core.editor.reset(fork.id)
        XCTAssertEqual(try count(db, "artists"), 5)
        XCTAssertEqual(try count(test, "artworks"), 0, "the source is its own")
    }

    /// Where copies share blocks a large fork's or upload's base is cloned
    /// before the answer: a clone costs less than the connection that would
    /// hold the file for a copy after it.
    func testWhereCopiesShareBlocksALargeStoresBaseIsMadeBeforeTheAnswer() throws {
        StoreRegistry.storageInTests = Storage(fileSystem: "xfs", sharesBlocks: true) // (copies fall back to whole ones here)
        defer { StoreRegistry.storageInTests = nil }
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try largeStore(core, megabytes: 2)
        let later = Mutex<[String]>([])
        StoreRegistry.beforeBaseCopy = { store in later.withLock { $0.append(store.id) } }
        defer { StoreRegistry.beforeBaseCopy = nil }
        let (fork, _) = try core.provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: 60)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: source.databasePath)))
        let (upload, _) = try core.provisioner.createFromUpload(.bytes(bytes), template: nil, version: nil, label: nil, ttlSeconds: 60)
        for store in [fork, upload] {
            XCTAssertTrue(FileSystem.exists(store.basePath), "\(store.id)'s base is there at the answer")
            let test = try Connection(path: store.databasePath, mode: .readWrite)
            try test.execute("DELETE FROM big WHERE id % 2 = 0")
            _ = try core.editor.reset(store.id)
            XCTAssertEqual(try count(test, "big"), 500)
        }
        XCTAssertEqual(later.withLock { $0 }, [], "no base was left for after the answer")
    }

    /// A store of `megabytes` MB: the gallery with a table `big` of 4 KB rows, checkpointed.
    /// The base a large fork gets after the answer is the file it was handed
    /// out as, or none: a test that removes its -shm (another process's
    /// connection then sees none of the server's locks), writes and
    /// checkpoints into the file before the base is copied must not see its
    /// rows hidden by the diff and kept by a reset.
    func testABaseCopiedAfterTheAnswerIsWhatWasHandedOutOrNone() throws {
        StoreRegistry.storageInTests = Storage(fileSystem: "ext4", sharesBlocks: false) // whole copies, whatever /tmp is
        defer { StoreRegistry.storageInTests = nil }
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try largeStore(core, megabytes: 2)
        let reached = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
        // (Only this fork's copy is held: another test's may still be under way.)
        StoreRegistry.beforeBaseCopy = { store in if store.record.label == "held" { reached.signal(); go.wait() } }
        defer { StoreRegistry.beforeBaseCopy = nil }
        let fork = try core.provisioner.createFork(of: source.id, fixtures: nil, label: "held", ttlSeconds: nil).0
        reached.wait()
        let attack = Process()
        attack.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        attack.arguments = ["python3", "-c", """
            import os, sqlite3, sys
            os.unlink(sys.argv[1] + "-shm")
            db = sqlite3.connect(sys.argv[1])
            db.execute("CREATE TABLE planted (x)")
            db.execute("INSERT INTO planted VALUES (1)")
            db.commit()
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            """, fork.databasePath]
        try attack.run()
        attack.waitUntilExit()
        XCTAssertEqual(attack.terminationStatus, 0)
        go.signal()
        do {
            let diff = try fork.diff()
            XCTAssertTrue(diff.schema.contains { $0.kind == .added && $0.name == "planted" }, "the diff hid the test's table: \(diff.schema)")
        } catch {
            XCTAssertEqual(LarderError.classify(error)?.code, .badRequest, "\(error)")
            XCTAssertTrue("\(error)".contains("before its base was copied"), "\(error)")
        }
        do {
            let reset = try core.editor.reset(fork.id)
            XCTAssertNil(try Connection(path: reset.databasePath, mode: .readOnly).scalar("SELECT name FROM sqlite_schema WHERE name = 'planted'"),
                         "a reset kept the test's table")
        } catch {
            XCTAssertEqual(LarderError.classify(error)?.code, .badRequest, "\(error)")
        }
    }

    /// `work`, again while it answers `conflict`, for up to 60 s: a copy of
    /// a store whose test never stops writing may wait out its busy timeout
    /// (in rollback-journal mode each commit locks readers out), the
    /// contract's 409, which a busy machine makes likelier.
    func untilNoConflict<T>(_ work: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(60)
        while true {
            do { return try work() } catch where LarderError.classify(error)?.code == .conflict && Date() < deadline { continue }
        }
    }

    func largeStore(_ core: CoreServices, megabytes: Int) throws -> Store {
        let store = try core.store("gallery", fixtures: ["artists", "artworks"])
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("""
            CREATE TABLE big (id INTEGER PRIMARY KEY, body BLOB);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(megabytes * 250))
            INSERT INTO big (body) SELECT randomblob(4000) FROM n;
            PRAGMA wal_checkpoint(TRUNCATE);
            """)
        return store
    }

    /// The base of a large fork is copied after the answer, while its test
    /// may already write: its writes, checkpointed into the file at once,
    /// never reach the base, and a reset right away waits for the base and
    /// restores the fork as it was handed out.
    func testALargeForksBaseIsItsStateAtTheAnswerWhateverItsTestWritesAtOnce() throws {
        StoreRegistry.storageInTests = Storage(fileSystem: "ext4", sharesBlocks: false) // whole copies, whatever /tmp is
        defer { StoreRegistry.storageInTests = nil }
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try largeStore(core, megabytes: 40)
        for round in 0..<3 {
            let (fork, _) = try core.provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: 60)
            let test = try Connection(path: fork.databasePath, mode: .readWrite, busyTimeoutMs: 10_000)
            // The last rows' pages, at the end of the file the copy reaches last.
            try test.execute("UPDATE big SET body = zeroblob(4000) WHERE id > (SELECT max(id) - 20 FROM big); DELETE FROM artworks")
            _ = try test.rows("PRAGMA wal_checkpoint(TRUNCATE)")
            _ = try core.editor.reset(fork.id)
            XCTAssertEqual(try test.scalar("SELECT count(*) FROM big WHERE body = zeroblob(4000)")?.int64, 0, "round \(round)")
            XCTAssertEqual(try count(test, "artworks"), 12, "round \(round)")
            XCTAssertEqual(try count(test, "big"), 10_000)
            XCTAssertEqual(try test.scalar("PRAGMA integrity_check")?.string, "ok")
        }
        XCTAssertEqual(FileSystem.entries(core.registry.layout.temporary), [], "no copy is left aside")
    }

    /// A large upload's base too: a reset at once restores the upload.
    func testALargeUploadsBaseIsTheUpload() throws {
        StoreRegistry.storageInTests = Storage(fileSystem: "ext4", sharesBlocks: false) // whole copies, whatever /tmp is
        defer { StoreRegistry.storageInTests = nil }
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try largeStore(core, megabytes: 4)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: source.databasePath)))
        let (upload, _) = try core.provisioner.createFromUpload(.bytes(bytes), template: nil, version: nil, label: nil, ttlSeconds: 60)
        let test = try Connection(path: upload.databasePath, mode: .readWrite)
        try test.execute("DELETE FROM big WHERE id % 2 = 0; DROP TABLE artworks")
        _ = try core.editor.reset(upload.id)
        XCTAssertEqual(try count(test, "big"), 1_000)
        XCTAssertEqual(try count(test, "artworks"), 12)
    }

    /// A large fork deleted at once, its base still being copied: the copy
    /// lands nowhere and leaves nothing behind.
    func testALargeForkDeletedAtOnceLeavesNothing() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try largeStore(core, megabytes: 20)
        var forks: [Store] = []
        for _ in 0..<3 {
            let (fork, _) = try core.provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: 60)
            try core.registry.delete(fork.id)
            forks.append(fork)
        }
        // Until each copy is over, stopped or not (waiting for an empty tmp/
        // raced a copy that had not begun yet: 5 runs of 30 failed so).
        for fork in forks { _ = try? fork.creationState(within: 10_000) }
        XCTAssertEqual(FileSystem.entries(core.registry.layout.temporary), [])
        let directories = forks.map(\.directory)
        for directory in directories { XCTAssertFalse(FileSystem.exists(directory), "no base made the deleted store's directory again") }
    }

    /// What needs a large fork's base waits for its copy within its own
    /// limit, then says it timed out, instead of holding its thread for as
    /// long as the disk takes; what has a longer limit gets the base.
    func testWaitingForABaseStillBeingCopiedEndsAtTheLimit() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.readTimeoutMs = 1 }
        let source = try largeStore(core, megabytes: 40)
        let (fork, _) = try core.provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: 60)
        // A diff's limit is 1 ms here; 40 MB take longer to copy.
        XCTAssertLarderError(.timeout, try fork.diff()) { error in
            XCTAssertTrue(error.message.contains("its base, copied after it was handed out, was not there within 1 ms"), error.message)
        }
        // A reset's limit is the operations' (60 s): it waits, and restores the fork.
        try Connection(path: fork.databasePath, mode: .readWrite).execute("DELETE FROM big")
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: try core.editor.reset(fork.id).lastCounts ?? [])["big"], 10_000)
        XCTAssertTrue(FileSystem.isPlainFile(fork.directory + "/base.sqlite"))
    }

    func testForkErrors() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        XCTAssertLarderError(.storeNotFound, try core.provisioner.createFork(of: "st_missing", fixtures: nil, label: nil, ttlSeconds: nil))
        let (empty, _) = try core.provisioner.createEmpty(label: nil, ttlSeconds: nil)
        XCTAssertLarderError(.badRequest, try core.provisioner.createFork(of: empty.id, fixtures: ["artists"], label: nil, ttlSeconds: nil))
        let gallery = try core.store("gallery")
        XCTAssertThrowsError(try core.provisioner.createFork(of: gallery.id, fixtures: ["no-such-fixture"], label: nil, ttlSeconds: nil))
        XCTAssertEqual(core.registry.count, 2, "a failed fork leaves nothing behind")
        XCTAssertEqual(core.registry.layout.halfMade, [])
    }

    func testAForkedStoresTriggersRunSandboxedWhenItsFixturesLoad() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try core.store("gallery")
        let test = try Connection(path: source.databasePath, mode: .readWrite)
        // What a hostile test leaves in its store: a trigger that reaches out.
        try test.execute("""
            CREATE TRIGGER reach AFTER INSERT ON artists BEGIN
              SELECT load_extension('/tmp/evil.so');
            END
            """)
        XCTAssertThrowsError(try core.provisioner.createFork(of: source.id, fixtures: ["artists"], label: nil, ttlSeconds: nil)) { error in
            XCTAssertTrue("\(error)".contains("load_extension") || "\(error)".contains("not authorized") || "\(error)".contains("forbidden"),
                          "\(error)")
        }
        XCTAssertEqual(core.registry.count, 1)
    }
}
