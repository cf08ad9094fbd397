// SPDX-License-Identifier: Apache-2.0
import Digest
import FileSystem
import FoundationEssentials
import LarderCore

/// The folder a self-started server shares with the test processes it
/// serves (`larder up`, `larder serve --shared`): one per user, binary,
/// fixtures folder and settings, so the workers of one run (pytest-xdist,
/// `go test ./...`, parallel JUnit forks) find one server, and the last one
/// out stops it.
///
///     ${TMPDIR:-/tmp}/larder-UID/KEY/
///         lock          held while a server is started, looked up or stopped
///         users/PID     one file per process served, holding its start time
///         server.json   {"url", "pid"} of the server, once it listens
///         server.log    its output
///         root/         its stores and cache (--root)
///         no-fixtures/  its fixtures folder when the project has none
///
/// The server stops, and removes the whole folder, once no process named
/// in `users/` has run for `linger` (a second: the next package of a run
/// that starts its processes one after another finds it still up).
public struct SharedRun: Sendable {
    public let folder: String
    public var lockFile: String { folder + "/lock" }
    public var users: String { folder + "/users" }
    public var stateFile: String { folder + "/server.json" }
    public var log: String { folder + "/server.log" }
    public var root: String { folder + "/root" }
    public var emptyFixtures: String { folder + "/no-fixtures" }

    public static let linger: Duration = .seconds(1)

    public init(folder: String) { self.folder = folder }

    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The run's folder for these inputs: `larder-UID/KEY` in the first of
    /// `temporaries` (TMPDIR, then /tmp) where no other user can move or
    /// replace a folder on the way (`isSafeBase`); `larder-UID`, private to
    /// this user, made when missing (the run's folder itself is made by
    /// `lock()`). A `larder-UID` that is a link, another user's, or open to
    /// others is refused: in a shared /tmp someone else could have made it
    /// first.
    public static func prepare(temporaries: [String], binary: String, fixtures: String?, settings: [String]) throws -> SharedRun {
        guard let temporary = temporaries.lazy.map(FileSystem.realPath).first(where: isSafeBase) else {
            throw Refusal("no temporary folder that only this user and root can change the way to (\(temporaries.joined(separator: ", "))): "
                          + "set TMPDIR to a folder of this user's, not open to others")
        }
        let parent = temporary + "/larder-\(FileSystem.userID)"
        try FileSystem.makeDirectory(parent, mode: 0o700)
        guard let made = FileSystem.directoryOwnership(parent), made.owner == FileSystem.userID, made.mode & 0o077 == 0 else {
            throw Refusal("\(parent) is not a private folder of this user (a link, another user's, or open to others): remove it, or set TMPDIR elsewhere")
        }
        let key = SHA256()
        for part in [binary, fixtures ?? ""] + settings { key.update(part + "\u{0}") }
        return SharedRun(folder: parent + "/" + String(key.finalize().prefix(16)))
    }

    /// Whether `path` (resolved, absolute) and every folder above it are
    /// this user's or root's and, where others may write them, sticky (as
    /// /tmp): then no other user can rename or replace what this user makes
    /// in it, such as the run's folder, between a check and its use.
    public static func isSafeBase(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        var prefix = ""
        for part in [""] + path.split(separator: "/").map(String.init) {
            prefix += part.isEmpty ? "/" : (prefix == "/" ? part : "/" + part)
            guard let folder = FileSystem.directoryOwnership(prefix), folder.owner == FileSystem.userID || folder.owner == 0,
                  folder.mode & 0o022 == 0 || folder.mode & 0o1000 != 0 else { return false } // writable by others only when sticky
        }
        return true
    }

    /// Whether `pid` is this run's server: a process of this user started
    /// as `serve --shared` with this run's folder (a stale or planted
    /// server.json may name any process).
    public func isServer(_ pid: Int32) -> Bool {
        guard let arguments = Processes.arguments(of: pid), let at = arguments.firstIndex(of: "--shared") else { return false }
        return arguments.contains("serve") && arguments.index(after: at) < arguments.endIndex && arguments[arguments.index(after: at)] == folder
    }

    /// Waits for the run's lock, with the folder and `users/` there. A
    /// server that stops removes the folder, lock file last, while it holds
    /// the lock: a waiter then makes the folder again and waits anew, and
    /// starts a server of its own.
    public func lock() throws -> FileLock {
        var attempts = 0
        while true {
            for folder in [folder, users] { try FileSystem.makeDirectory(folder, mode: 0o700) }
            do {
                let lock = try FileLock.wait(lockFile)
                // Removed between the mkdir and the lock: made again under the lock.
                try FileSystem.makeDirectory(users, mode: 0o700)
                return lock
            } catch let failure as FileSystem.Failure where failure.isMissing && attempts < 1_000 {
                attempts += 1 // the folder went while this waited: once per server that stopped meanwhile
            }
        }
    }

    /// Names `pid` as a process this run's server serves.
    public func register(_ pid: Int32) throws {
        guard let started = Processes.startTime(pid) ?? (Processes.isRunning(pid) ? "" : nil) else {
            throw Refusal("no process \(pid) runs to serve")
        }
        try FileSystem.writeAtomically(Array(started.utf8), to: users + "/\(pid)")
    }

    /// The processes named in `users/` that still run; the files of those
    /// that ended are removed.
    public func liveUsers() -> [Int32] {
        FileSystem.entries(users).compactMap { name -> Int32? in
            guard let pid = Int32(name) else { return nil }
            let started = (try? FileSystem.readFile(users + "/" + name)).map { String(decoding: $0, as: UTF8.self) }
            if Processes.isRunning(pid, startTime: started.flatMap { $0.isEmpty ? nil : $0 }) { return pid }
            FileSystem.remove(users + "/" + name)
            return nil
        }
    }

    public struct State: Sendable, Equatable {
        public var url: String
        public var pid: Int32
        /// The server process's start time (`Processes.startTime`): a later process given its pid is not it.
        public var started: String?
        public init(url: String, pid: Int32, started: String? = nil) { self.url = url; self.pid = pid; self.started = started }
        /// Whether the server process still runs (not merely its pid).
        public var isRunning: Bool { Processes.isRunning(pid, startTime: started) }
    }

    public func state() -> State? {
        guard let bytes = try? FileSystem.readFile(stateFile), let value = try? JSONValue.parse(bytes),
              let url = value["url"]?.stringValue, let pid = value["pid"]?.intValue else { return nil }
        return State(url: url, pid: Int32(truncatingIfNeeded: pid), started: value["started"]?.stringValue)
    }

    public func write(_ state: State) throws {
        let value = JSONValue.object([("url", .string(state.url)), ("pid", .int(Int64(state.pid))), ("started", JSONValue(state.started))])
        try FileSystem.writeAtomically(value.serialized(), to: stateFile)
    }

    /// Removes what a server of this run left: its state, root, log and
    /// fixtures stand-in. `everything`: the users and the folder too (the
    /// lock file last, so a waiter on it starts again on a new one).
    public func clear(everything: Bool) {
        FileSystem.remove(stateFile)
        for tree in [root, emptyFixtures] { try? FileSystem.removeTree(tree, within: folder) }
        guard everything else { return }
        FileSystem.remove(log)
        try? FileSystem.removeTree(users, within: folder)
        FileSystem.remove(lockFile)
        FileSystem.removeEmptyDirectory(folder)
    }
}
