// SPDX-License-Identifier: Apache-2.0
import CSystem
import Platform
import Synchronization

/// Syncs to disk shared by the changes that wait at once (a group commit):
/// a change takes a ticket once it is made, and `wait(for:sync:)` returns
/// once a sync begun after it has ended. One waiter syncs while the others
/// queue on the lock, and each then finds its ticket covered: N requests
/// arriving together cost about two syncs, not N.
public final class GroupSync: Sendable {
    /// Off: tickets are 0 and nothing is synced (a root on tmpfs, or one
    /// thrown away after its run).
    public let enabled: Bool
    private let made = Atomic<UInt64>(0)
    /// The last ticket a finished sync covers; held across the sync.
    private let covered = Mutex<UInt64>(0)

    public init(enabled: Bool) { self.enabled = enabled }

    /// A ticket for a change just made.
    public func changed() -> UInt64 {
        enabled ? made.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue : 0
    }

    /// Returns once a `sync` begun after the change of `ticket` has ended.
    public func wait(for ticket: UInt64, sync: () throws -> Void) throws {
        guard ticket > 0 else { return }
        try run(unless: ticket, sync)
    }

    /// Runs `sync`, which covers every change made before it begins (and
    /// more: a whole file system's), whatever is covered already.
    public func run(_ sync: () throws -> Void) throws {
        guard enabled else { return }
        try run(unless: nil, sync)
    }

    private func run(unless ticket: UInt64?, _ sync: () throws -> Void) throws {
        try covered.withLock { covered in
            if let ticket, covered >= ticket { return }
            let upTo = made.load(ordering: .sequentiallyConsistent)
            try sync()
            covered = max(covered, upTo)
        }
    }
}

extension FileSystem {
    /// Whether `path` is on a file system that a power cut empties anyway
    /// (tmpfs, ramfs): nothing there is worth a sync. Portable: POSIX names
    /// no file system types, so every one is worth it.
    public static func isVolatile(_ path: String) -> Bool {
        if Syscalls.portable { return false }
        var fs = statfs()
        guard statfs(path, &fs) == 0 else { return false }
        return fs.f_type == 0x0102_1994 || fs.f_type == 0x8584_58F6
    }

    /// Writes what the descriptor's file (or directory: its entries) holds
    /// to disk. A file system that cannot sync (EINVAL) has nothing to offer.
    public static func sync(_ fd: Int32, path: String, dataOnly: Bool = false) throws {
        guard (dataOnly ? fdatasync(fd) : fsync(fd)) == 0 || errno == EINVAL else { throw Failure("cannot sync", path) }
    }

    /// Writes everything the file system of `fd` holds to disk (one call
    /// for many files made in the background). Portable, without syncfs:
    /// each of `directories` (below `fd`'s), the files in it, then `fd`'s
    /// own directory, one fsync each (what the call was to cover).
    public static func syncFileSystem(_ fd: Int32, path: String, covering directories: [String]) throws {
        if Syscalls.portable {
            for directory in directories { try syncDirectoryAndFiles(directory) }
            return try sync(fd, path: path)
        }
        guard larder_syncfs(fd) == 0 else { throw Failure("cannot sync the file system of", path) }
    }

    /// `sync` of each plain file directly in `path` (never through a
    /// link, nor waiting on a FIFO), then of the directory itself; a
    /// directory gone meanwhile has nothing left to sync.
    static func syncDirectoryAndFiles(_ path: String) throws {
        do {
            try OpenDirectory.opening(path) { directory in
                for name in entries(path) {
                    let fd = openat(directory.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                    guard fd >= 0 else { continue } // a link, or gone
                    defer { close(fd) }
                    var info = stat()
                    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                    try sync(fd, path: path + "/" + name)
                }
                try sync(directory.fd, path: path)
            }
        } catch let failure as Failure where failure.isMissing {}
    }

    /// `sync` of the file or directory at `path`, never a link there (nor
    /// blocking on a FIFO).
    public static func sync(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot open", path) }
        defer { close(fd) }
        try sync(fd, path: path)
    }
}
