// SPDX-License-Identifier: Apache-2.0
import CSystem
import Platform

/// Other processes, as a server that lives for them sees them.
public enum Processes {
    /// What tells this run of `pid` from a later process given the same
    /// number: its start time in clock ticks since boot (field 22 of
    /// /proc/PID/stat). Nil when no such process runs, or it has exited and
    /// waits for its parent (a zombie runs no more code). Portable: POSIX
    /// has no start time to read, so nil (Darwin: proc_pidinfo's
    /// pbi_start_tvsec, docs/macos.md).
    public static func startTime(_ pid: Int32) -> String? {
        Syscalls.portable ? nil : startTimeFromProc(pid)
    }

    private static func startTimeFromProc(_ pid: Int32) -> String? {
        guard pid > 0, let bytes = try? FileSystem.readFile("/proc/\(pid)/stat") else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        // "PID (COMMAND) STATE PPID ...": the command may hold spaces and ')'.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
        return String(fields[19])
    }

    /// Whether `pid` runs and, when `startTime` is given, is the same run.
    /// Portable: whether a process of that number exists (a zombie too, and
    /// a later one given the number: there is no start time to tell).
    public static func isRunning(_ pid: Int32, startTime expected: String? = nil) -> Bool {
        if !Syscalls.portable {
            if let now = startTimeFromProc(pid) { return expected == nil || expected == now }
            // No /proc (or not this one's): the kernel's answer, zombies included.
            guard !FileSystem.exists("/proc/self/stat") else { return false }
        }
        return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// The arguments `pid` was started with (/proc/PID/cmdline), when it is
    /// a process of this user: nil for another user's, or none. Portable:
    /// POSIX cannot read another process's arguments, so nil (Darwin:
    /// sysctl KERN_PROCARGS2, docs/macos.md).
    public static func arguments(of pid: Int32) -> [String]? {
        var info = stat()
        guard !Syscalls.portable, pid > 0, stat("/proc/\(pid)", &info) == 0, info.st_uid == getuid(),
              let bytes = try? FileSystem.readFile("/proc/\(pid)/cmdline"), !bytes.isEmpty else { return nil }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// The running binary's path, resolved: /proc/self/exe, or portably
    /// the command's first argument, found as the shell found it (Darwin:
    /// _NSGetExecutablePath, docs/macos.md); that argument as it is when
    /// it cannot be found.
    public static func executablePath() -> String {
        if !Syscalls.portable { return FileSystem.realPath("/proc/self/exe") }
        // Resolved against the working directory the process started in,
        // which the command never changes.
        return find(CommandLine.arguments.first ?? "", searching: getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin")
    }

    /// `command` resolved as a shell finds it: a path (with a slash) as it
    /// is, a name in the first folder of `search` that holds such an
    /// executable file; itself when none does.
    static func find(_ command: String, searching search: String) -> String {
        if command.isEmpty || command.contains("/") { return FileSystem.realPath(command) }
        for folder in search.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = FileSystem.realPath((folder.isEmpty ? "." : String(folder)) + "/" + command)
            if FileSystem.isPlainFile(candidate), access(candidate, X_OK) == 0 { return candidate }
        }
        return command
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
