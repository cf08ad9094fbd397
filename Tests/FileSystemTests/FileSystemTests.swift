import Dispatch
import FileSystem
import Foundation
import Platform
import Synchronization
import XCTest

/// The file system layer alone, on real files in a scratch directory:
/// trees removed by descriptor and never outside their root, copies that
/// refuse links when told, one-name checks, the root's lock, the watches.
final class FileSystemTests: XCTestCase {
    var scratch = ""

    override func setUpWithError() throws {
        scratch = NSTemporaryDirectory() + "larder-fs-" + UUID().uuidString
        try FileSystem.makeDirectories(scratch)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: scratch) }

    func write(_ path: String, _ text: String = "x") throws { try FileSystem.writeFile(Array(text.utf8), to: path) }

    /// Linux's own calls for the rest of the test, however the run was started (`LARDER_PORTABLE_SYSCALLS`).
    func forcingLinuxCalls() {
        let was = Syscalls.portable
        Syscalls.portable = false
        addTeardownBlock { Syscalls.portable = was }
    }

    /// A FIFO (or a device) where a plain file is expected is refused at
    /// once by every read and copy, never waited on for a writer.
    func testAFIFOInPlaceOfAFileIsRefusedAtOnce() throws {
        let fifo = scratch + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let answered = expectation(description: "every read answered")
        let refusals = Mutex(0)
        let scratch = scratch
        Thread.detachNewThread {
            let attempts: [() throws -> Void] = [
                { _ = try FileSystem.readFile(fifo) },
                { _ = try FileSystem.readPrefix(fifo, count: 16) },
                { try FileSystem.copyFile(from: fifo, to: scratch + "/copy") },
                { _ = try ReadableFile(path: fifo) },
                { _ = try FileSystem.readFile("/dev/zero") },
            ]
            for attempt in attempts {
                do { try attempt() } catch { refusals.withLock { $0 += 1 } }
            }
            answered.fulfill()
        }
        wait(for: [answered], timeout: 20)
        XCTAssertEqual(refusals.withLock { $0 }, 5)
        XCTAssertFalse(FileSystem.exists(scratch + "/copy"))
    }

    /// A private directory is made 0700, and one an older version left open is closed; a link is left alone.
    func testAPrivateDirectoryIsClosedToOthersWhetherNewOrOld() throws {
        let new = scratch + "/new", old = scratch + "/old", target = scratch + "/target", link = scratch + "/link"
        try FileSystem.makePrivateDirectory(new)
        try FileSystem.makeDirectory(old, mode: 0o755)
        try FileSystem.makeDirectory(target, mode: 0o755)
        XCTAssertEqual(chmod(target, 0o755), 0)
        XCTAssertEqual(symlink(target, link), 0)
        try FileSystem.makePrivateDirectory(old)
        try FileSystem.makePrivateDirectory(link)
        var info = stat()
        for (path, mode) in [(new, 0o700), (old, 0o700), (target, 0o755)] {
            XCTAssertEqual(stat(path, &info), 0)
            XCTAssertEqual(Int(info.st_mode & 0o7777), mode, path)
        }
    }

    func testRemoveTreeRemovesLinksNeverWhatTheyPointAt() throws {
        let root = scratch + "/root", outside = scratch + "/outside"
        try FileSystem.makeDirectories(root + "/tree/a/b")
        try FileSystem.makeDirectories(outside)
        try write(outside + "/keep")
        try write(root + "/tree/a/b/file")
        XCTAssertEqual(symlink(outside, root + "/tree/a/link-to-dir"), 0)
        XCTAssertEqual(symlink(outside + "/keep", root + "/tree/link-to-file"), 0)
        try FileSystem.removeTree(root + "/tree", within: root)
        XCTAssertFalse(FileSystem.exists(root + "/tree"))
        XCTAssertEqual(FileSystem.entries(outside), ["keep"], "what the links pointed at is untouched")
    }

    func testRemoveTreeRefusesAnythingOutsideItsRoot() throws {
        let root = scratch + "/root"
        try FileSystem.makeDirectories(root)
        try FileSystem.makeDirectories(scratch + "/other")
        for path in [scratch + "/other", root, root + "/../other", root + "/.."] {
            XCTAssertThrowsError(try FileSystem.removeTree(path, within: root), path)
        }
        XCTAssertTrue(FileSystem.isDirectory(scratch + "/other"))
    }

    func testRemoveTreeGoesDeeperThanItsDescriptorDepth() throws {
        let root = scratch + "/root"
        var path = root + "/deep"
        for level in 0..<80 { path += "/d\(level)" }
        try FileSystem.makeDirectories(path)
        try write(path + "/bottom")
        try FileSystem.removeTree(root + "/deep", within: root)
        XCTAssertEqual(FileSystem.entries(root), [])
    }

    func testCopyRefusesALinkWhenToldAndEntryNamesWhatIsThere() throws {
        try write(scratch + "/source", "contents")
        XCTAssertEqual(symlink(scratch + "/source", scratch + "/link"), 0)
        XCTAssertThrowsError(try FileSystem.copyFile(from: scratch + "/link", to: scratch + "/copy", followingLinks: false))
        XCTAssertFalse(FileSystem.exists(scratch + "/copy"), "nothing half-made")
        try FileSystem.copyFile(from: scratch + "/source", to: scratch + "/copy")
        XCTAssertEqual(try FileSystem.readFile(scratch + "/copy"), Array("contents".utf8))
        XCTAssertThrowsError(try FileSystem.copyFile(from: scratch + "/source", to: scratch + "/copy"), "the target must not exist")

        XCTAssertEqual(FileSystem.entry(scratch + "/copy"), .ownFile)
        XCTAssertEqual(FileSystem.entry(scratch + "/nothing"), .missing)
        XCTAssertEqual(FileSystem.entry(scratch + "/link"), .foreign("a symbolic link"))
        XCTAssertEqual(link(scratch + "/copy", scratch + "/second-name"), 0)
        XCTAssertEqual(FileSystem.entry(scratch + "/copy"), .foreign("a hard link to a file that has another name"))
        XCTAssertEqual(FileSystem.entry(scratch), .foreign("a directory"))
    }

    func testAnOpenDirectoryMakesCopiesLinksAndRemovesByDescriptorNeverThroughALink() throws {
        try write(scratch + "/source", "contents")
        let made = scratch + "/made"
        let copied = try OpenDirectory.making(made) { directory -> Int64 in
            try directory.setAccess(mode: 0o750, group: nil)
            let copied = try directory.copy(from: scratch + "/source", as: "copy", mode: 0o640, group: nil)
            try directory.link(scratch + "/source", as: "second")
            XCTAssertThrowsError(try directory.copy(from: scratch + "/source", as: "copy", mode: 0o640, group: nil), "the target must not exist")
            XCTAssertEqual(directory.size("copy"), 8)
            XCTAssertEqual(directory.entry("copy"), .ownFile)
            XCTAssertEqual(directory.entry("second"), .foreign("a hard link to a file that has another name"))
            XCTAssertEqual(directory.entry("nothing"), .missing)
            XCTAssertEqual(directory.size("nothing"), 0)
            return copied
        }
        XCTAssertEqual(copied, 8)
        XCTAssertEqual(try FileSystem.readFile(made + "/copy"), Array("contents".utf8))
        XCTAssertEqual(FileSystem.permissions(made), 0o750)
        XCTAssertEqual(FileSystem.permissions(made + "/copy"), 0o640, "whatever the umask")
        XCTAssertThrowsError(try OpenDirectory.making(made) { _ in }, "an existing directory is never taken over")

        // A link where the directory was is refused, and a link inside is removed as itself.
        XCTAssertEqual(symlink(made, scratch + "/link-to-made"), 0)
        XCTAssertThrowsError(try OpenDirectory.opening(scratch + "/link-to-made") { _ in })
        XCTAssertEqual(symlink(scratch + "/source", made + "/link-to-source"), 0)
        try OpenDirectory.opening(made) { directory in
            XCTAssertEqual(directory.entry("link-to-source"), .foreign("a symbolic link"))
            XCTAssertTrue(directory.remove("link-to-source"))
            XCTAssertFalse(directory.remove("link-to-source"))
        }
        XCTAssertEqual(try FileSystem.readFile(scratch + "/source"), Array("contents".utf8), "what the link pointed at is untouched")
    }

    func testRenameNewNeverReplaces() throws {
        try FileSystem.makeDirectories(scratch + "/a")
        try FileSystem.makeDirectories(scratch + "/b")
        XCTAssertThrowsError(try FileSystem.renameNew(scratch + "/a", to: scratch + "/b"), "not even an empty directory")
        try FileSystem.renameNew(scratch + "/a", to: scratch + "/c")
        XCTAssertEqual(FileSystem.entries(scratch), ["b", "c"])
    }

    /// Threads of this process named `name`.
    func threads(named name: String) -> Int {
        FileSystem.entries("/proc/self/task").filter {
            (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?.hasPrefix(name) == true
        }.count
    }

    func testAYieldingQueueRunsInOrderAtNice19OnAThreadThatEndsWithIt() throws {
        forcingLinuxCalls() // Linux's scheduling hints and thread names; the portable ways: PortableSyscallsTests
        let ran = Mutex<[String]>([])
        var queue: YieldingQueue? = YieldingQueue(name: "larder-fs-test")
        queue!.async(afterMilliseconds: 50) { ran.withLock { $0.append("late") } }
        for n in 0..<3 { queue!.async { ran.withLock { $0.append("\(n)") } } }
        queue!.sync {
            errno = 0
            let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
            ran.withLock { $0.append("nice \(nice)") }
        }
        XCTAssertEqual(ran.withLock { $0 }, ["0", "1", "2", "nice 19"], "the delayed work waits its time; sync waits for the rest")
        XCTAssertEqual(threads(named: "larder-fs-test"), 1)
        Threads.sleep(milliseconds: 80)
        XCTAssertEqual(ran.withLock { $0 }.last, "late")
        queue = nil
        let deadline = Date().addingTimeInterval(5)
        while threads(named: "larder-fs-test") > 0, Date() < deadline { Threads.sleep(milliseconds: 5) }
        XCTAssertEqual(threads(named: "larder-fs-test"), 0, "the thread ends with its queue")
    }

    func testAFileLockIsHeldUntilReleasedAndNamesItsHolder() throws {
        let path = scratch + "/lock"
        guard case .acquired(let lock) = try FileLock.acquire(path) else { return XCTFail("the first takes it") }
        guard case .heldBy(let pid) = try FileLock.acquire(path) else { return XCTFail("the second is refused") }
        XCTAssertEqual(pid, getpid())
        lock.release()
        guard case .acquired(let again) = try FileLock.acquire(path) else { return XCTFail("free once released") }
        again.release()
    }

    func testWaitingForALockStartsAgainWhenItsHolderRemovedTheFile() throws {
        let path = scratch + "/lock"
        let first = try FileLock.wait(path)
        let won = Date()
        let waiter = Thread {
            // Blocks until the first lets go; the file it locked by then is gone, so it locks the new one.
            let second = try? FileLock.wait(path)
            XCTAssertNotNil(second)
            XCTAssertGreaterThan(Date().timeIntervalSince(won), 0.15)
            second?.release()
        }
        waiter.start()
        Thread.sleep(forTimeInterval: 0.2)
        FileSystem.remove(path)
        first.release()
        let deadline = Date().addingTimeInterval(5)
        while !waiter.isFinished && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertTrue(waiter.isFinished)
        // The lock the waiter held was on the file now at the path.
        XCTAssertTrue(FileSystem.exists(path))
        guard case .acquired(let again) = try FileLock.acquire(path) else { return XCTFail("released") }
        again.release()
    }

    func testAProcessIsKnownByItsStartTimeAndAnEndedOneIsNotRunning() throws {
        forcingLinuxCalls() // /proc's start times; the portable ways: PortableSyscallsTests
        let mine = try XCTUnwrap(Processes.startTime(getpid()))
        XCTAssertTrue(Processes.isRunning(getpid(), startTime: mine))
        // The same number with another start time is another process.
        XCTAssertFalse(Processes.isRunning(getpid(), startTime: mine + "0"))
        // A child that ended and was not yet waited for (a zombie) runs no more.
        let child = try Processes.spawnDetached("/bin/true", arguments: [], log: scratch + "/log")
        let deadline = Date().addingTimeInterval(5)
        while Processes.startTime(child) != nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertFalse(Processes.isRunning(child))
        XCTAssertTrue(FileSystem.exists("/proc/\(child)"), "still a zombie")
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertFalse(Processes.isRunning(child))
    }

    /// On ext4 without a journal, allocating an inode steps over those of
    /// its group freed in the last minutes: a directory whose
    /// subdirectories churn is marked to spread them (`chattr +T`), and
    /// only there (elsewhere the flag costs and buys nothing).
    func testOnlyExt4WithoutAJournalSpreadsAChurningDirectory() throws {
        forcingLinuxCalls() // ext4's flags; the portable ways: PortableSyscallsTests
        let directory = scratch + "/churn"
        try FileSystem.makeDirectory(directory)
        let withoutJournal = FileSystem.skipsRecentlyFreedInodes(directory)
        XCTAssertEqual(withoutJournal, try Self.isExt4WithoutJournal(directory), "as /proc/self/mountinfo and /proc/fs/jbd2 say")
        XCTAssertEqual(FileSystem.spreadSubdirectories(directory), withoutJournal)
        XCTAssertEqual(FileSystem.spreadsSubdirectories(directory) == true, withoutJournal)
        XCTAssertFalse(FileSystem.spreadSubdirectories(scratch + "/missing"))
    }

    /// The same question answered from other files: the mount holding
    /// `path` is ext4 and its device has no journal in /proc/fs/jbd2.
    static func isExt4WithoutJournal(_ path: String) throws -> Bool {
        let real = FileSystem.realPath(path)
        var best: (point: String, type: String, source: String)?
        for line in try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8).split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            let fields = halves[0].split(separator: " "), tail = halves[1].split(separator: " ")
            let point = String(fields[4]).replacingOccurrences(of: "\\040", with: " ")
            guard real == point || real.hasPrefix(point == "/" ? "/" : point + "/"), point.count >= (best?.point.count ?? 0) else { continue }
            best = (point, String(tail[0]), String(tail[1]))
        }
        guard let best, best.type == "ext4" else { return false }
        let device = FileSystem.lastComponent(best.source)
        let journals = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/fs/jbd2")) ?? []
        return !journals.contains { $0.hasPrefix(device + "-") }
    }

    func testADirectoryWatchSeesChangesAndCanBeWoken() throws {
        let watch = try XCTUnwrap(DirectoryWatch())
        guard case .watching(let id) = watch.watch(scratch) else { return XCTFail("watching") }
        XCTAssertEqual(watch.watch(scratch + "/nothing"), .missing)
        XCTAssertFalse(watch.changed())
        try write(scratch + "/new")
        XCTAssertEqual(watch.wait(milliseconds: 2000), [id])
        XCTAssertFalse(watch.changed(), "drained")
        let woken = Date()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { watch.wake() }
        XCTAssertEqual(watch.wait(milliseconds: 10_000), [])
        XCTAssertLessThan(Date().timeIntervalSince(woken), 5, "a wake cuts the wait short")
    }

    func testPathsPartsAsDirnameAndBasenameHaveThem() {
        for (path, parent, last) in [("/a/b", "/a", "b"), ("/a/b/", "/a", "b"), ("/a", "/", "a"), ("b", "", "b"),
                                     ("a/b", "a", "b"), ("/", "/", "/"), ("", "", ""), ("test-reports/m.xml", "test-reports", "m.xml")] {
            XCTAssertEqual(FileSystem.parent(path), parent, path)
            XCTAssertEqual(FileSystem.lastComponent(path), last, path)
        }
    }

    func testAThreadRunsNamedAndAConditionWakesOrTimesOut() throws {
        forcingLinuxCalls() // Linux's thread names; the portable ways: PortableSyscallsTests
        let condition = Condition()
        nonisolated(unsafe) var name = ""
        condition.lock()
        Threads.start("larder-test-thread-long-name") {
            let found = ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .newlines)
            condition.withLock {
                name = found
                condition.signal()
            }
        }
        let started = ContinuousClock.now
        while name.isEmpty { XCTAssertTrue(condition.wait(seconds: 10), "signalled") }
        XCTAssertEqual(name, "larder-test-thr", "the kernel keeps 15 bytes")
        XCTAssertFalse(condition.wait(seconds: 0.05), "no one signals: the time runs out")
        condition.unlock()
        let waited = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(50))
        XCTAssertLessThan(waited, .seconds(10))
    }

    func testSleepLastsAtLeastItsTimeAndALatchStaysSet() {
        let started = ContinuousClock.now
        Threads.sleep(milliseconds: 30)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(30))
        let latch = Latch()
        XCTAssertFalse(latch.isSet)
        latch.set()
        latch.set()
        XCTAssertTrue(latch.isSet)
    }

    /// Group commit: every waiter returns only after a sync that began
    /// after its change, and waiters arriving together share syncs.
    func testGroupSyncCoversEveryChangeWithASyncBegunAfterIt() {
        let syncs = GroupSync(enabled: true)
        let changes = Atomic<Int>(0)
        let state = Mutex((syncs: 0, begunAt: [Int]()))
        let waiters = 64
        let late = Atomic<Int>(0)
        let done = DispatchGroup()
        // Threads of their own, more than the cores: the waiters must queue while one syncs.
        for _ in 0..<waiters {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                let made = changes.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
                let ticket = syncs.changed()
                try! syncs.wait(for: ticket) {
                    let seen = changes.load(ordering: .sequentiallyConsistent)
                    state.withLock { $0.syncs += 1; $0.begunAt.append(seen) }
                    Thread.sleep(forTimeInterval: 0.002) // a disk's sync
                }
                // Some sync that began once this change was made has ended.
                if !state.withLock({ $0.begunAt.contains { $0 >= made } }) { late.add(1, ordering: .relaxed) }
            }
        }
        done.wait()
        XCTAssertEqual(late.load(ordering: .relaxed), 0, "a waiter returned before a sync covering its change")
        XCTAssertLessThan(state.withLock { $0.syncs }, waiters, "no sync was shared")
        let off = GroupSync(enabled: false)
        XCTAssertEqual(off.changed(), 0)
        XCTAssertNoThrow(try off.wait(for: off.changed()) { XCTFail("synced while off") })
    }
}
