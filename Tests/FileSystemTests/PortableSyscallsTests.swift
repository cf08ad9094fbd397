import Dispatch
@testable import FileSystem
import Foundation
import Platform
import Synchronization
import XCTest

/// Each Linux call and its portable stand-in (`Syscalls.portable`,
/// docs/macos.md) doing the same job on real files, both in one run
/// whichever way the run was started; and what only Linux can tell.
final class PortableSyscallsTests: XCTestCase {
    var scratch = ""

    override func setUpWithError() throws {
        scratch = NSTemporaryDirectory() + "larder-portable-" + UUID().uuidString
        try FileSystem.makeDirectories(scratch)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: scratch) }

    func write(_ path: String, _ text: String = "x") throws { try FileSystem.writeFile(Array(text.utf8), to: path) }

    /// `body` with Linux's calls, then with the portable ones.
    func eitherWay(_ body: (_ portable: Bool) throws -> Void) rethrows {
        for portable in [false, true] { try Syscalls.forcing(portable: portable) { try body(portable) } }
    }

    func code(_ error: Error) -> Int32? { (error as? FileSystem.Failure)?.code }

    /// copy_file_range, or read and write: the same bytes, a stop honoured
    /// midway with nothing left behind, an existing target never written over.
    func testACopyIsTheSameBytesEitherWay() throws {
        let source = scratch + "/source"
        let bytes = (0..<(5 << 20) + 123).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
        try FileSystem.writeFile(bytes, to: source)
        try write(scratch + "/empty", "")
        try eitherWay { portable in
            let copy = scratch + "/copy-\(portable)"
            try FileSystem.copyFile(from: source, to: copy)
            XCTAssertEqual(try FileSystem.readFile(copy), bytes, "portable: \(portable)")
            try FileSystem.copyFile(from: scratch + "/empty", to: copy + "-empty")
            XCTAssertEqual(FileSystem.size(copy + "-empty"), 0)
            XCTAssertThrowsError(try FileSystem.copyFile(from: source, to: copy)) { XCTAssertEqual(code($0), EEXIST) }
            let input = try FileSystem.openForReading(source)
            defer { close(input) }
            var asked = 0
            XCTAssertThrowsError(try FileSystem.copyFile(from: input, named: source, to: copy + "-stopped") { asked += 1; return asked > 1 }) {
                XCTAssertEqual(code($0), ECANCELED)
            }
            XCTAssertFalse(FileSystem.exists(copy + "-stopped"), "portable: \(portable)")
            // Into a directory held open, with its mode.
            let bytesCopied = try OpenDirectory.opening(scratch) { try $0.copy(from: source, as: "held-\(portable)", mode: 0o640, group: nil) }
            XCTAssertEqual(bytesCopied, Int64(bytes.count))
            XCTAssertEqual(FileSystem.permissions(scratch + "/held-\(portable)"), 0o640)
        }
    }

    /// renameat2's RENAME_NOREPLACE, or link (a file) and mkdir (a
    /// directory): a free name is taken, a taken one refused with EEXIST and
    /// both left as they were, a link moved as itself.
    func testRenamingToANewNameNeverReplacesEitherWay() throws {
        try eitherWay { portable in
            let top = scratch + "/\(portable)"
            try FileSystem.makeDirectories(top + "/a/inside")
            try FileSystem.makeDirectory(top + "/b")
            XCTAssertThrowsError(try FileSystem.renameNew(top + "/a", to: top + "/b"), "not even an empty directory") { XCTAssertEqual(code($0), EEXIST) }
            try FileSystem.renameNew(top + "/a", to: top + "/c")
            XCTAssertEqual(FileSystem.entries(top + "/c"), ["inside"])
            try write(top + "/f", "one")
            try write(top + "/g", "two")
            XCTAssertThrowsError(try FileSystem.renameNew(top + "/f", to: top + "/g")) { XCTAssertEqual(code($0), EEXIST) }
            XCTAssertEqual(try FileSystem.readFile(top + "/f"), Array("one".utf8))
            XCTAssertEqual(try FileSystem.readFile(top + "/g"), Array("two".utf8))
            try FileSystem.renameNew(top + "/f", to: top + "/h")
            XCTAssertEqual(try FileSystem.readFile(top + "/h"), Array("one".utf8))
            XCTAssertEqual(FileSystem.entry(top + "/h"), .ownFile, "one name, not two")
            XCTAssertEqual(symlink(top + "/h", top + "/link"), 0)
            try FileSystem.renameNew(top + "/link", to: top + "/moved-link")
            XCTAssertEqual(FileSystem.entry(top + "/moved-link"), .foreign("a symbolic link"))
            XCTAssertThrowsError(try FileSystem.renameNew(top + "/nothing", to: top + "/z")) { XCTAssertEqual(code($0), ENOENT) }
            XCTAssertEqual(FileSystem.entries(top), ["b", "c", "g", "h", "moved-link"], "portable: \(portable)")
        }
    }

    /// inotify, or a look at every entry: a file made, written or removed
    /// is told once for its directory's watch alone; a wake cuts a wait short.
    func testWatchingADirectorySeesEachChangeEitherWay() throws {
        try eitherWay { portable in
            let folder = scratch + "/\(portable)", other = scratch + "/other-\(portable)"
            try FileSystem.makeDirectory(folder)
            try FileSystem.makeDirectory(other)
            let watch = try XCTUnwrap(DirectoryWatch())
            guard case .watching(let id) = watch.watch(folder), case .watching(let otherID) = watch.watch(other) else { return XCTFail("watching") }
            XCTAssertNotEqual(id, otherID)
            XCTAssertEqual(watch.watch(folder), .watching(id), "the same directory, the same watch")
            XCTAssertEqual(watch.watch(folder + "/nothing"), .missing)
            XCTAssertFalse(watch.changed())
            try write(folder + "/new")
            XCTAssertEqual(watch.wait(milliseconds: 2000), [id], "made; portable: \(portable)")
            XCTAssertFalse(watch.changed(), "drained")
            let appending = try AppendingFile(path: folder + "/new")
            try appending.append(Array("more".utf8))
            XCTAssertEqual(watch.wait(milliseconds: 2000), [id], "written; portable: \(portable)")
            FileSystem.remove(folder + "/new")
            try write(other + "/file")
            XCTAssertEqual(watch.changes(), [id, otherID], "removed, and made in the other")
            watch.unwatch(otherID)
            _ = watch.changed() // (inotify tells of the watch it removed)
            try write(other + "/second")
            XCTAssertFalse(watch.changed(), "no longer watched")
            let woken = Date()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { watch.wake() }
            XCTAssertEqual(watch.wait(milliseconds: 10_000), [])
            XCTAssertLessThan(Date().timeIntervalSince(woken), 5, "a wake cuts the wait short")
        }
    }

    /// syncfs, or an fsync of each directory named, its files and the top:
    /// neither waits on a FIFO nor follows a link, and a directory gone
    /// meanwhile is no failure.
    func testSyncingTheFileSystemCoversTheDirectoriesNamedEitherWay() throws {
        let top = scratch + "/stores"
        for name in ["a", "b"] {
            try FileSystem.makeDirectories(top + "/" + name)
            try write(top + "/\(name)/store.sqlite", name)
        }
        XCTAssertEqual(mkfifo(top + "/a/fifo", 0o600), 0)
        XCTAssertEqual(symlink("/dev/null", top + "/b/link"), 0)
        let held = try HeldDirectory(top)
        try eitherWay { portable in
            let started = Date()
            try FileSystem.syncFileSystem(held.directory.fd, path: top, covering: [top + "/a", top + "/b", top + "/gone"])
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, "portable: \(portable)")
        }
    }

    /// SCHED_IDLE at nice 19 and a name for `top -H`, or neither: the work
    /// runs in the same order either way.
    func testSchedulingHintsAndThreadNamesAreLinuxsAlone() throws {
        let processNice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        try eitherWay { portable in
            let ran = Mutex<[String]>([])
            let seen = Mutex<(nice: Int32, policy: Int32, name: String)?>(nil)
            let name = "larder-hint-\(portable)"
            let queue = YieldingQueue(name: name)
            queue.async(afterMilliseconds: 30) { ran.withLock { $0.append("late") } }
            for n in 0..<3 { queue.async { ran.withLock { $0.append("\(n)") } } }
            queue.sync {
                let thread = ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
                seen.withLock { $0 = (getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0), sched_getscheduler(0), thread) }
            }
            Threads.sleep(milliseconds: 60)
            XCTAssertEqual(ran.withLock { $0 }, ["0", "1", "2", "late"], "portable: \(portable)")
            let thread = try XCTUnwrap(seen.withLock { $0 })
            // (5 is SCHED_IDLE, 0 SCHED_OTHER: glibc names the first only under _GNU_SOURCE.)
            XCTAssertEqual(thread.nice, portable ? processNice : 19)
            XCTAssertEqual(thread.policy, portable ? 0 : 5)
            XCTAssertEqual(thread.name == String(name.prefix(15)), !portable, thread.name)
        }
    }

    /// /proc/self/exe, or the command's first argument found as a shell finds it: the same binary.
    func testTheRunningBinaryIsFoundEitherWay() throws {
        let linux = Syscalls.forcing(portable: false) { Processes.executablePath() }
        let portable = Syscalls.forcing(portable: true) { Processes.executablePath() }
        XCTAssertEqual(portable, linux)
        XCTAssertTrue(FileSystem.isPlainFile(linux), linux)
        // A bare name is looked for along PATH: a folder without it, or with a file not executable, is passed over.
        for folder in ["one", "two", "three"] { try FileSystem.makeDirectory(scratch + "/" + folder) }
        try write(scratch + "/two/tool")
        try write(scratch + "/three/tool")
        XCTAssertEqual(chmod(scratch + "/three/tool", 0o755), 0)
        let search = "\(scratch)/one:/nonexistent:\(scratch)/two:\(scratch)/three"
        XCTAssertEqual(Processes.find("tool", searching: search), FileSystem.realPath(scratch + "/three/tool"))
        XCTAssertEqual(Processes.find("absent", searching: search), "absent")
        XCTAssertEqual(Processes.find(scratch + "/two/../three/tool", searching: ""), FileSystem.realPath(scratch + "/three/tool"))
    }

    /// /proc/PID, or kill(pid, 0): a live process runs and a reaped one
    /// does not either way; only /proc tells a start time, the arguments,
    /// and a zombie from a live one.
    func testProcessesAreToldApartOnlyWithProc() throws {
        try eitherWay { portable in
            XCTAssertTrue(Processes.isRunning(getpid()))
            let child = try Processes.spawnDetached("/bin/true", arguments: [], log: scratch + "/log")
            let deadline = Date().addingTimeInterval(5)
            // Ended, not yet waited for: a zombie.
            while (try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8))?.contains(") Z ") != true && Date() < deadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
            XCTAssertEqual(Processes.isRunning(child), portable, "a zombie runs no more, but only /proc can tell")
            var status: Int32 = 0
            XCTAssertEqual(waitpid(child, &status, 0), child)
            XCTAssertFalse(Processes.isRunning(child), "portable: \(portable)")
            if portable {
                XCTAssertNil(Processes.startTime(getpid()))
                XCTAssertTrue(Processes.isRunning(getpid(), startTime: "another"), "no start time to tell it by")
                XCTAssertNil(Processes.arguments(of: getpid()))
            } else {
                let started = try XCTUnwrap(Processes.startTime(getpid()))
                XCTAssertFalse(Processes.isRunning(getpid(), startTime: started + "0"))
                XCTAssertEqual(Processes.arguments(of: getpid())?.count, CommandLine.arguments.count)
            }
        }
    }

    /// ext4's flags and tmpfs are Linux's: portably no directory is spread
    /// and every file system is worth a sync.
    func testFileSystemFlagsAreLinuxsAlone() throws {
        Syscalls.forcing(portable: true) {
            XCTAssertFalse(FileSystem.skipsRecentlyFreedInodes(scratch))
            XCTAssertFalse(FileSystem.spreadSubdirectories(scratch))
            XCTAssertNil(FileSystem.spreadsSubdirectories(scratch))
            XCTAssertFalse(FileSystem.isVolatile("/dev/shm"))
        }
        // (Linux's answers: FileSystemTests.testOnlyExt4WithoutAJournalSpreadsAChurningDirectory.)
        let tmpfs = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8))?.split(separator: "\n")
            .contains { $0.split(separator: " ")[4] == "/dev/shm" && $0.contains(" - tmpfs ") } ?? false
        XCTAssertEqual(Syscalls.forcing(portable: false) { FileSystem.isVolatile("/dev/shm") }, tmpfs)
    }
}
