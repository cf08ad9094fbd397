import CSQLite
import Foundation
import SQLite
import Synchronization
import TestSupport
import XCTest

final class ConnectionTests: XCTestCase {
    var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "larder-sqlite-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testScriptsAreSplitBySQLitesOwnParser() throws {
        let db = try Connection(path: directory + "/a.sqlite")
        try db.execute("""
            CREATE TABLE t (v TEXT); -- a comment; with a semicolon
            INSERT INTO t VALUES ('a;b');
            CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO t VALUES ('x;y') ; END;
            /* block; comment */ INSERT INTO t VALUES ('c');
            """)
        let values = try db.rows("SELECT v FROM t ORDER BY rowid").compactMap { $0[0].string }
        XCTAssertEqual(values, ["a;b", "c", "x;y"])
    }

    /// A FIFO in place of a database's -shm, -wal or -journal, or of the
    /// file itself: SQLite's opens fail at once (SQLITE_CANTOPEN), for a
    /// read-only connection too, whose open of a FIFO would block for good.
    func testFIFOsInPlaceOfADatabasesFilesFailAtOnce() throws {
        for suffix in ["-shm", "-wal", "-journal", ""] {
            let path = directory + "/fifo\(suffix.isEmpty ? "-main" : suffix).sqlite"
            try Connection(path: path).execute("PRAGMA journal_mode=\(suffix == "-journal" ? "DELETE" : "WAL"); CREATE TABLE t (a); INSERT INTO t VALUES (1);")
            unlink(path + suffix)
            XCTAssertEqual(mkfifo(path + suffix, 0o600), 0)
            let answered = expectation(description: "answered with a FIFO as \(suffix)")
            let failed = Mutex<Bool?>(nil)
            Thread.detachNewThread {
                let outcome: Bool
                do {
                    let db = try Connection(path: path, mode: .readOnly)
                    if suffix == "-journal" { try db.execute("PRAGMA journal_mode") } // a hot journal is looked for on read
                    _ = try db.rows("SELECT count(*) FROM t")
                    outcome = false
                } catch let error as SQLiteError {
                    outcome = error.isCantOpen || error.primaryCode == SQLITE_IOERR || error.primaryCode == SQLITE_NOTADB
                } catch { outcome = false }
                failed.withLock { $0 = outcome }
                answered.fulfill()
            }
            wait(for: [answered], timeout: 20)
            if suffix != "-journal" { XCTAssertEqual(failed.withLock { $0 }, true, "a FIFO as \(suffix.isEmpty ? "the file" : suffix)") }
        }
    }

    /// SQLite's temporary files grow only into what the budget grants: a
    /// sort past it fails as SQLITE_FULL marked as the budget's, and what
    /// they held is given back when they close.
    func testTemporaryFilesStayWithinTheirBudget() throws {
        let granted = Mutex<Int64>(0)
        TemporaryFiles.budget { bytes in granted.withLock { total in
            guard total + bytes <= 4 << 20 else { return false }
            total += bytes
            return true
        } }
        defer { TemporaryFiles.budget(nil) }
        let db = try Connection(path: directory + "/temp.sqlite")
        try db.execute("PRAGMA cache_size = -512")
        let before = TemporaryFiles.bytes
        let sort = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT x, randomblob(100) AS b FROM c ORDER BY b"
        XCTAssertThrowsError(try db.rows(sort)) { error in
            let sqlite = error as? SQLiteError
            XCTAssertEqual(sqlite?.primaryCode, SQLITE_FULL, "\(error)")
            XCTAssertEqual(sqlite?.overTemporaryBudget, true, "\(error)")
        }
        XCTAssertEqual(TemporaryFiles.bytes, before, "given back when the sort's files closed")
        XCTAssertFalse(TemporaryFiles.takeRefusal())
        XCTAssertEqual(try db.rows(sort.replacing("200000", with: "2000")).count, 2000, "small work fits")
    }

    func testPrepareSingleRefusesASecondStatement() throws {
        let db = try Connection(path: directory + "/a.sqlite")
        XCTAssertNoThrow(try db.prepareSingle("SELECT 1; -- trailing comment"))
        XCTAssertThrowsError(try db.prepareSingle("SELECT 1; SELECT 2"))
    }

    func testSandboxRefusesEscapes() throws {
        let path = directory + "/a.sqlite"
        try Connection(path: path).execute("CREATE TABLE t (a); INSERT INTO t VALUES (1);")
        let db = try Connection(path: path, mode: .readWrite)
        try db.harden()
        for sql in ["ATTACH '\(directory!)/x.sqlite' AS x", "VACUUM INTO '\(directory!)/y.sqlite'", "PRAGMA writable_schema = 1",
                    "PRAGMA journal_mode = DELETE", "PRAGMA temp_store_directory = '/tmp'", "PRAGMA trusted_schema = 1",
                    "SELECT load_extension('libx')", "SELECT fts3_tokenizer('simple')", "BEGIN"] {
            XCTAssertThrowsError(try db.untrusted { try db.withTimeLimit(milliseconds: 1000) { try db.rows(sql) } }, sql)
            XCTAssertNotNil(db.sandboxRefusal, "no refusal noted for \(sql)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/x.sqlite"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/y.sqlite"))
        XCTAssertEqual(try db.untrusted { try db.scalar("PRAGMA user_version")?.int64 }, 0)
        XCTAssertEqual(try db.untrusted { try db.rows("PRAGMA table_info(t)").count }, 1)
        // Larder's own statements still run on the hardened connection.
        XCTAssertNoThrow(try db.execute("PRAGMA user_version = 2"))
    }

    func testTimeLimitInterruptsARunawayQuery() throws {
        let db = try Connection(path: directory + "/a.sqlite")
        try db.harden()
        let started = Date()
        XCTAssertThrowsError(try db.withTimeLimit(milliseconds: 100) {
            try db.rows("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        }) { error in
            XCTAssertTrue((error as? SQLiteError)?.isInterrupt ?? false, "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testBackupIsAConsistentCopyWhileAnotherConnectionWrites() throws {
        let path = directory + "/live.sqlite"
        let writer = try Connection(path: path)
        try writer.execute("PRAGMA journal_mode=WAL; CREATE TABLE t (n INTEGER);")
        let running = Flag(true)
        let thread = Thread {
            let w = try! Connection(path: path, mode: .readWrite)
            var i = 0
            while running.value {
                try? w.transaction { try w.run("INSERT INTO t VALUES (?)", [.integer(Int64(i))]); try w.run("INSERT INTO t VALUES (?)", [.integer(Int64(i))]) }
                i += 1
            }
        }
        thread.start()
        defer { running.value = false }
        for n in 0..<5 {
            let copy = directory + "/copy\(n).sqlite"
            try Connection(path: path, mode: .readWrite).backup(to: copy)
            let c = try Connection(path: copy, mode: .readOnly)
            XCTAssertEqual(try c.scalar("PRAGMA integrity_check")?.string, "ok")
            // Rows come in pairs per commit: a copy never holds half a commit.
            XCTAssertEqual((try c.scalar("SELECT count(*) FROM t")?.int64 ?? 1) % 2, 0)
        }
    }

    /// A database another connection locks for good (a test's
    /// `locking_mode=EXCLUSIVE`): a copy waits the source's busy timeout,
    /// then fails busy; a time limit or an interrupt ends the wait sooner.
    func testACopyOfALockedDatabaseGivesUpAndCanBeStopped() throws {
        let scratch = Scratch()
        let path = scratch.path + "/locked.sqlite"
        let holder = try Connection(path: path)
        try holder.execute("PRAGMA journal_mode=WAL; CREATE TABLE t (x); PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
        var started = Date()
        let waiting = try Connection(path: path, mode: .readWrite, busyTimeoutMs: 300)
        XCTAssertThrowsError(try waiting.backup(to: scratch.path + "/a.sqlite")) { XCTAssertTrue(($0 as? SQLiteError)?.isBusy == true, "\($0)") }
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)

        let patient = try Connection(path: path, mode: .readWrite, busyTimeoutMs: 60_000)
        started = Date()
        XCTAssertThrowsError(try patient.withTimeLimit(milliseconds: 200) { try patient.backup(to: scratch.path + "/b.sqlite") })
        XCTAssertTrue(patient.timedOut)
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)

        let stopped = try Connection(path: path, mode: .readWrite, busyTimeoutMs: 60_000)
        started = Date()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) { stopped.interrupt() }
        XCTAssertThrowsError(try stopped.backup(to: scratch.path + "/c.sqlite")) { XCTAssertEqual(($0 as? SQLiteError)?.code, 9 /* SQLITE_INTERRUPT */, "\($0)") }
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        try holder.execute("ROLLBACK")
    }

    func testValidateRejectsSomethingThatIsNotADatabase() throws {
        let path = directory + "/not.sqlite"
        try Data("SQLite format 3\0".utf8 + [UInt8](repeating: 7, count: 200)).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try Connection.validate(path: path))
    }

    func testImmutableOpensAnyPathAndLeavesNothingBeside() throws {
        let scratch = Scratch()
        let directory = scratch.path + "/odd ?#% name"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        do {  // a WAL database, closed, as a template cache file is once built
            let source = try Connection(path: directory + "/base.sqlite")
            try source.execute("PRAGMA journal_mode=WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1), (2)")
        }
        let immutable = try Connection.immutable(path: directory + "/base.sqlite")
        XCTAssertEqual(try immutable.scalar("SELECT count(*) FROM t")?.int64, 2)
        XCTAssertThrowsError(try immutable.execute("INSERT INTO t VALUES (3)"), "read-only")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["base.sqlite"], "no -wal, no -shm")
    }

    func testRestoreReplacesTheContentsInPlaceUnderAnOpenConnection() throws {
        let scratch = Scratch()
        let base = try scratch.database("base.sqlite")
        try base.execute("CREATE TABLE t (x); INSERT INTO t VALUES ('base')")
        let live = try scratch.database("live.sqlite")
        try live.execute("PRAGMA journal_mode=WAL; CREATE TABLE t (x); CREATE TABLE extra (y); INSERT INTO t VALUES ('changed')")
        let other = try scratch.database("live.sqlite")
        XCTAssertEqual(try rows(other, "SELECT x FROM t"), [["changed"]])
        try live.restore(from: base)
        XCTAssertEqual(try rows(other, "SELECT x FROM t"), [["base"]])
        XCTAssertNil(try other.scalar("SELECT name FROM sqlite_schema WHERE name = 'extra'"))
        // Another connection's write transaction: the busy timeout, then SQLITE_BUSY.
        try other.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES ('held')")
        let waiting = try Connection(path: scratch.path + "/live.sqlite", mode: .readWrite, busyTimeoutMs: 50)
        XCTAssertThrowsError(try waiting.restore(from: base)) { error in
            XCTAssertEqual((error as? SQLiteError)?.primaryCode, 5, "SQLITE_BUSY")
        }
        try other.execute("ROLLBACK")
        XCTAssertNoThrow(try waiting.restore(from: base))
    }

    /// Statements counted without a database: a `;` in a string, a comment
    /// or a trigger's body ends nothing; comments alone are no statement.
    func testStatementTextEndsStatementsWhereSQLiteDoes() {
        let sql = """
            -- CreateTable
            CREATE TABLE a (x TEXT DEFAULT 'a;b');
            /* a comment; with a semicolon */
            CREATE TRIGGER t AFTER INSERT ON a BEGIN
              INSERT INTO a VALUES ('x'); DELETE FROM a WHERE 0;
            END;
            ;;
            INSERT INTO a VALUES (1) -- no semicolon at the end
            """
        let statements = StatementText.statements(sql).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        XCTAssertEqual(statements.count, 3, "\(statements)")
        XCTAssertTrue(statements[1].hasPrefix("/* a comment; with a semicolon */\nCREATE TRIGGER t") && statements[1].hasSuffix("END;"), statements[1])
        XCTAssertEqual(StatementText.statements("-- only a comment\n;").count, 0)
        XCTAssertFalse(StatementText.hasStatement("  ; -- x\n /* y */ "))
    }
}
