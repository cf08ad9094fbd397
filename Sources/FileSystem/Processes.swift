// SPDX-License-Identifier: Apache-2.0
import CSystem
import Platform

/// Other processes, as a server that lives for them sees them.
public enum Processes {
    /// What tells this run of `pid` from a later process given the same
    /// number: its start time in clock ticks since boot (field 22 of
    /// /proc/PID/stat). Nil when no such process runs, or it has exited and
    /// waits for its parent (a zombie runs no more code).
    public static func startTime(_ pid: Int32) -> String? {
        guard pid > 0, let bytes = try? FileSystem.readFile("/proc/\(pid)/stat") else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        // "PID (COMMAND) STATE PPID ...": the command may hold spaces and ')'.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
        return String(fields[19])
    }

    /// Whether `pid` runs and, when `startTime` is given, is the same run.
    public static func isRunning(_ pid: Int32, startTime expected: String? = nil) -> Bool {
        if let now = startTime(pid) { return expected == nil || expected == now }
        // No /proc (or not this one's): the kernel's answer, zombies included.
        guard !FileSystem.exists("/proc/self/stat") else { return false }
        return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// The arguments `pid` was started with (/proc/PID/cmdline), when it is
    /// a process of this user: nil for another user's, or none.
    public static func arguments(of pid: Int32) -> [String]? {
        var info = stat()
        guard pid > 0, stat("/proc/\(pid)", &info) == 0, info.st_uid == getuid(),
              let bytes = try? FileSystem.readFile("/proc/\(pid)/cmdline"), !bytes.isEmpty else { return nil }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// Starts `path` with `arguments` in a session of its own, detached from
    /// the caller's terminal and process group, its output appended to `log`.
    public static func spawnDetached(_ path: String, arguments: [String], log: String) throws -> Int32 {
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let pid = argv.withUnsafeMutableBufferPointer { larder_spawn_detached(path, $0.baseAddress, environ, log) }
        guard pid > 0 else { throw FileSystem.Failure("cannot start", path, -pid) }
        return pid
    }
}
