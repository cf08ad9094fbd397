import FileSystem
import Foundation
import LarderCore
import SQLite
import Synchronization
import TestSupport
import XCTest

/// App-built templates (`BuildRegistry`): claimed by one builder, finished,
/// waited for, discarded, leased, kept across a restart, copied into stores.
final class BuildsTests: XCTestCase {
    func builds(_ core: CoreServices, lease: Duration = .seconds(300)) throws -> BuildRegistry {
        try BuildRegistry(registry: core.registry, cache: core.provisioner.cache, lease: lease)
    }

    /// What a migrator like Django's leaves: its bookkeeping table and the app's tables.
    func migrateLikeDjango(_ path: String, polls: Int = 3) throws {
        let db = try Connection(path: path, mode: .readWrite)
        try db.execute("""
            CREATE TABLE django_migrations (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, app varchar(255) NOT NULL, name varchar(255) NOT NULL, applied datetime NOT NULL);
            INSERT INTO django_migrations (app, name, applied) VALUES ('polls', '0001_initial', '2026-11-23'), ('polls', '0002_choice_votes', '2026-11-23');
            CREATE TABLE polls_question (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, question_text varchar(200) NOT NULL);
            CREATE INDEX polls_question_text ON polls_question (question_text);
            """)
        for i in 0..<polls { try db.run("INSERT INTO polls_question (question_text) VALUES (?)", [.text("question \(i)")]) }
    }

    func path(_ claim: BuildRegistry.Claim) -> String? {
        if case .build(let info) = claim { return info.path }
        return nil
    }

    func state(_ claim: BuildRegistry.Claim) -> String {
        switch claim {
        case .build: return "build"
        case .building: return "building"
        case .ready: return "ready"
        }
    }

    func testTwoWorkersAskingAtOnceOneBuildsTheOtherWaitsThenGetsCopies() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let builds = try builds(core)
        let claims = Mutex<[BuildRegistry.Claim]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            let claim = try! builds.claim(key: "django-abc", label: "worker")
            claims.withLock { $0.append(claim) }
        }
        XCTAssertEqual(claims.withLock { $0.map(state).sorted() }, ["build", "building"])
        let file = try XCTUnwrap(claims.withLock { $0.compactMap(path).first })
        XCTAssertEqual(try builds.info("django-abc").state, .building)

        // The waiter holds no thread: it is told when the build is ready.
        let told = expectation(description: "the waiter hears the build is ready")
        let heard = Mutex<TemplateCache.Entry?>(nil)
        _ = builds.whenReady("django-abc", timeoutMs: 10_000) { result in
            heard.withLock { $0 = try? result.get() }
            told.fulfill()
        }
        try migrateLikeDjango(file)
        let ready = try builds.finish("django-abc")
        wait(for: [told], timeout: 5)
        XCTAssertEqual(ready.state, .ready)
        XCTAssertNil(ready.version, "Django numbers migrations per app: no one number is the version")
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: ready.counts ?? [])["polls_question"], 3)
        XCTAssertEqual(ready.label, "worker")
        let entry = try XCTUnwrap(heard.withLock { $0 })
        XCTAssertEqual(state(try builds.claim(key: "django-abc", label: nil)), "ready")

        let (a, _) = try core.provisioner.create(build: "django-abc", entry: entry, label: nil, ttlSeconds: nil)
        let (b, _) = try core.provisioner.create(build: "django-abc", entry: try builds.entry("django-abc"), label: nil, ttlSeconds: nil)
        XCTAssertEqual(a.record.build, "django-abc")
        XCTAssertNil(a.record.version, "a Django database has no one version")
        for store in [a, b] {
            let db = try Connection(path: store.databasePath, mode: .readOnly)
            XCTAssertEqual(try db.scalar("SELECT count(*) FROM django_migrations")?.int64, 2, "the app's bookkeeping is kept")
            XCTAssertEqual(try db.scalar("PRAGMA journal_mode")?.string, "wal")
        }
        XCTAssertEqual(FileSystem.entries(builds.directory), [], "the builder's directory is gone once finished")
    }

    func testStoresFromABuildAreIndependentOfItAndOfEachOtherAndDiffResetAndFork() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let builds = try builds(core)
        try migrateLikeDjango(try XCTUnwrap(path(try builds.claim(key: "k1", label: nil))))
        _ = try builds.finish("k1")
        let (a, _) = try core.provisioner.create(build: "k1", entry: try builds.entry("k1"), label: nil, ttlSeconds: nil)
        let (b, _) = try core.provisioner.create(build: "k1", entry: try builds.entry("k1"), label: nil, ttlSeconds: nil)
        let test = try Connection(path: a.databasePath, mode: .readWrite)
        try test.execute("INSERT INTO polls_question (question_text) VALUES ('only in a'); DELETE FROM polls_question WHERE id = 1")
        XCTAssertEqual(try b.counts().first { $0.0 == "polls_question" }?.1, 3)
        let (c, _) = try core.provisioner.create(build: "k1", entry: try builds.entry("k1"), label: nil, ttlSeconds: nil)
        XCTAssertEqual(try c.counts().first { $0.0 == "polls_question" }?.1, 3, "the build itself is untouched")
        XCTAssertEqual(FileSystem.permissions(try builds.entry("k1").path).map { $0 & 0o222 }, 0, "the build's file is read-only")

        let diff = try a.diff()
        XCTAssertEqual(diff.tables.first { $0.0 == "polls_question" }.map { [$0.1.inserted, $0.1.deleted] }, [1, 1])
        XCTAssertEqual(try core.registry.get(a.id).record.creationDescription, "build k1")
        let (fork, _) = try core.provisioner.createFork(of: a.id, fixtures: nil, label: nil, ttlSeconds: nil)
        XCTAssertEqual(try fork.counts().first { $0.0 == "polls_question" }?.1, 3)
        XCTAssertEqual(fork.record.build, "k1")
        _ = try core.editor.reset(a.id)
        XCTAssertEqual(try test.scalar("SELECT count(*) FROM polls_question WHERE question_text = 'only in a'")?.int64, 0)
        XCTAssertEqual(try a.counts().first { $0.0 == "polls_question" }?.1, 3)
    }

    func testFinishRefusesAnOpenWriteTransactionAndTheBuildStaysBuilding() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.busyTimeoutMs = 50 }
        let builds = try builds(core)
        let file = try XCTUnwrap(path(try builds.claim(key: "open", label: nil)))
        let builder = try Connection(path: file, mode: .readWrite)
        try builder.execute("CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1)")
        XCTAssertLarderError(.conflict, try builds.finish("open")) { XCTAssertTrue($0.message.contains("write transaction"), $0.message) }
        XCTAssertEqual(try builds.info("open").state, .building)
        try builder.execute("COMMIT")
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: try builds.finish("open").counts ?? [])["t"], 1)
        // The builder's connection, still open, cannot change the finished build.
        try builder.execute("INSERT INTO t VALUES (2)")
        XCTAssertEqual(try Connection(path: try builds.entry("open").path, mode: .readOnly).scalar("SELECT count(*) FROM t")?.int64, 1)
        XCTAssertEqual(try builds.finish("open").state, .ready, "finishing a ready build answers it as it is")
    }

    func testFinishRefusesACorruptFileWithAClearErrorAndTheBuildStaysBuilding() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let builds = try builds(core)
        let file = try XCTUnwrap(path(try builds.claim(key: "corrupt", label: nil)))
        do {
            let db = try Connection(path: file, mode: .readWrite)
            try db.execute("PRAGMA journal_mode=DELETE; CREATE TABLE t (x TEXT); CREATE INDEX t_x ON t (x)")
            try db.transaction {
                for i in 0..<2000 { try db.run("INSERT INTO t VALUES (?)", [.text("row \(i) " + String(repeating: "x", count: 40))]) }
            }
        }
        // Scribble over a page in the middle of the index.
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: file))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2 / 4096 * 4096 + 100)
        handle.write(Data(repeating: 0xA5, count: 3000))
        try handle.close()
        XCTAssertLarderError(.sqlError, try builds.finish("corrupt")) { XCTAssertTrue($0.message.contains("build 'corrupt'"), $0.message) }
        XCTAssertEqual(try builds.info("corrupt").state, .building)
        try builds.discard("corrupt")
        XCTAssertLarderError(.unknownBuild, try builds.info("corrupt"))
    }

    func testALeaseThatRunsOutDiscardsTheBuildAndTellsItsWaiters() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let builds = try builds(core, lease: .milliseconds(300))
        let file = try XCTUnwrap(path(try builds.claim(key: "crashed", label: nil)))
        let told = expectation(description: "the waiter hears the build was discarded")
        let heard = Mutex<LarderError?>(nil)
        _ = builds.whenReady("crashed", timeoutMs: 10_000) { result in
            if case .failure(let error) = result { heard.withLock { $0 = error } }
            told.fulfill()
        }
        wait(for: [told], timeout: 5)
        XCTAssertEqual(heard.withLock { $0?.code }, .unknownBuild)
        XCTAssertTrue(heard.withLock { $0?.message.contains("lease") } == true)
        XCTAssertFalse(FileSystem.exists(file))
        XCTAssertLarderError(.unknownBuild, try builds.finish("crashed"))
        XCTAssertNotNil(path(try builds.claim(key: "crashed", label: nil)), "the next caller builds it")
    }

    func testADiscardedBuildIsBuiltAgainAndAWaitTimesOut() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let builds = try builds(core)
        _ = try builds.claim(key: "k", label: nil)
        let timedOut = expectation(description: "a short wait times out")
        _ = builds.whenReady("k", timeoutMs: 50) { result in
            if case .failure(let error) = result, error.code == .timeout { timedOut.fulfill() }
        }
        wait(for: [timedOut], timeout: 5)
        let told = expectation(description: "a waiter hears of the discard")
        _ = builds.whenReady("k", timeoutMs: 10_000) { result in
            if case .failure(let error) = result, error.code == .unknownBuild { told.fulfill() }
        }
        try builds.discard("k")
        wait(for: [told], timeout: 5)
        let again = try XCTUnwrap(path(try builds.claim(key: "k", label: nil)))
        try migrateLikeDjango(again, polls: 1)
        _ = try builds.finish("k")
        // A ready build can be discarded too: the next claim builds it again; stores made from it stay.
        let (store, _) = try core.provisioner.create(build: "k", entry: try builds.entry("k"), label: nil, ttlSeconds: nil)
        try builds.discard("k")
        XCTAssertLarderError(.unknownBuild, try builds.entry("k"))
        XCTAssertEqual(try store.counts().first { $0.0 == "polls_question" }?.1, 1)
        _ = try core.editor.reset(store.id)
        XCTAssertEqual(state(try builds.claim(key: "k", label: nil)), "build")
        XCTAssertLarderError(.unknownBuild, try builds.discard("never"))
    }

    func testARestartKeepsFinishedBuildsAndDiscardsUnfinishedOnes() throws {
        let scratch = Scratch()
        var core = try CoreServices(scratch)
        var builds = try builds(core)
        try migrateLikeDjango(try XCTUnwrap(path(try builds.claim(key: "done", label: "kept"))))
        _ = try builds.finish("done")
        let unfinished = try XCTUnwrap(path(try builds.claim(key: "half", label: nil)))
        try migrateLikeDjango(unfinished)
        core.registry.close()
        core = try CoreServices(scratch)
        builds = try self.builds(core)
        XCTAssertEqual(builds.list().map(\.key), ["done"])
        let done = try builds.info("done")
        XCTAssertEqual(done.state, .ready)
        XCTAssertEqual(done.label, "kept")
        XCTAssertNil(done.version)
        XCTAssertNotNil(done.finishedAt)
        XCTAssertLarderError(.unknownBuild, try builds.info("half"))
        XCTAssertFalse(FileSystem.exists(unfinished))
        let (store, _) = try core.provisioner.create(build: "done", entry: try builds.entry("done"), label: nil, ttlSeconds: nil)
        XCTAssertEqual(try store.counts().first { $0.0 == "polls_question" }?.1, 3)
        XCTAssertEqual(state(try builds.claim(key: "half", label: nil)), "build")
    }

    func testKeysAreCheckedBeforeAnythingIsMade() throws {
        let scratch = Scratch()
        let builds = try builds(try CoreServices(scratch))
        for key in ["", "a/b", "../x", "k y", "é", String(repeating: "k", count: 129), "a\u{0}b"] {
            XCTAssertLarderError(.badRequest, try builds.claim(key: key, label: nil))
            XCTAssertLarderError(.badRequest, try builds.finish(key))
            XCTAssertLarderError(.badRequest, try builds.discard(key))
        }
        XCTAssertEqual(FileSystem.entries(builds.directory), [])
        XCTAssertEqual(state(try builds.claim(key: String(repeating: "k", count: 128), label: nil)), "build")
        XCTAssertEqual(state(try builds.claim(key: "A.b_c-9", label: nil)), "build")
        // Keys never become paths: "." and ".." are keys like any other.
        XCTAssertEqual(state(try builds.claim(key: "..", label: nil)), "build")
        XCTAssertEqual(FileSystem.entries(builds.directory).count, 3)
    }

    func testFinishNeverFollowsALinkTheBuilderPlanted() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let builds = try builds(core)
        let store = try core.store("gallery", fixtures: ["artists"])
        let file = try XCTUnwrap(path(try builds.claim(key: "link", label: nil)))
        FileSystem.removeDatabase(file)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: store.databasePath)
        XCTAssertLarderError(.badRequest, try builds.finish("link")) { XCTAssertTrue($0.message.contains("link"), $0.message) }
        XCTAssertEqual(try builds.info("link").state, .building)
        XCTAssertEqual(builds.list().filter { $0.state == .ready }.count, 0, "another store's file never becomes a build")
    }

    func testFinishingIsTimeLimitedAndATimeoutLeavesTheBuildBuilding() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.operationTimeoutMs = 1 }
        let builds = try builds(core)
        let file = try XCTUnwrap(path(try builds.claim(key: "slow", label: nil)))
        do {
            let db = try Connection(path: file, mode: .readWrite)
            try db.execute("CREATE TABLE t (x TEXT); CREATE INDEX t_x ON t (x)")
            try db.transaction {
                for i in 0..<50_000 { try db.run("INSERT INTO t VALUES (?)", [.text("row \(i)")]) }
            }
        }
        XCTAssertLarderError(.timeout, try builds.finish("slow")) { XCTAssertTrue($0.message.contains("finishing build 'slow'"), $0.message) }
        XCTAssertEqual(try builds.info("slow").state, .building)
        XCTAssertEqual(FileSystem.entries(core.registry.layout.temporary).filter { $0.hasPrefix("build-") }, [], "no copy is left behind")
    }

    /// Each build under way is a file a client may fill: no more of them than --max-stores.
    func testBuildsUnderWayAreBoundedByTheStoreLimit() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.maxStores = 2 }
        let builds = try self.builds(core)
        _ = try builds.claim(key: "a", label: nil)
        _ = try builds.claim(key: "b", label: nil)
        XCTAssertLarderError(.quotaExceeded, try builds.claim(key: "c", label: nil))
        // Asking about one under way is not a new one.
        if case .building = try builds.claim(key: "a", label: nil) {} else { XCTFail("a is building") }
        try builds.discard("a")
        if case .build = try builds.claim(key: "c", label: nil) {} else { XCTFail("c builds once a slot is free") }
    }
}
