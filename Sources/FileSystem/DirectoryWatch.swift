// SPDX-License-Identifier: Apache-2.0
import Platform
import Synchronization

/// inotify watches on directories (not recursive): whether anything changed
/// below them since last asked, which ones, and a wait for the next change
/// that another thread can cut short. One non-blocking read answers what a
/// stat of every file would.
///
/// Portable (`Syscalls.portable`), without inotify: each question stats the
/// watched directories and their entries and compares them with the last
/// look (Darwin: kqueue's EVFILT_VNODE or FSEvents, docs/macos.md); a wait
/// looks again every `pollingMilliseconds`.
public final class DirectoryWatch: @unchecked Sendable {
    /// inotify's descriptor; -1 when polling.
    private let descriptor: Int32
    private let wakePipe: WakePipe
    /// Portable: each watch's path and its last look, by id, and the next id.
    private struct Looks {
        var watches: [Int32: (path: String, look: [String]?)] = [:]
        var next: Int32 = 1
    }
    private let looks = Mutex(Looks())
    private let polling: Bool

    /// How often a portable wait looks again.
    public static let pollingMilliseconds = 50

    public init?() {
        guard let pipe = WakePipe() else { return nil }
        if Syscalls.portable {
            descriptor = -1
            polling = true
        } else {
            descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            if descriptor < 0 { return nil }
            polling = false
        }
        wakePipe = pipe
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    public enum Watch: Sendable, Equatable { case watching(Int32), missing, refused }

    /// What is watched: `everything` (files made, changed, moved, removed) or
    /// `writes` (a database and its WAL being written). Polling sees both alike.
    public enum Events: Sendable {
        case everything, writes
        var mask: UInt32 {
            switch self {
            case .everything: return UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
            case .writes: return UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE)
            }
        }
    }

    /// Watches `path`; `.watching` carries the watch's id (the same id for
    /// a path watched again, as inotify gives for the same directory).
    @discardableResult
    public func watch(_ path: String, for events: Events = .everything) -> Watch {
        if polling {
            guard let look = DirectoryWatch.look(path) else { return .missing }
            return looks.withLock { all in
                // Watched already: its last look stays, so a change not yet asked about is still told.
                if let known = all.watches.first(where: { $0.value.path == path }) { return .watching(known.key) }
                defer { all.next += 1 }
                all.watches[all.next] = (path, look)
                return .watching(all.next)
            }
        }
        let id = inotify_add_watch(descriptor, path, events.mask)
        if id >= 0 { return .watching(id) }
        return errno == ENOENT || errno == ENOTDIR ? .missing : .refused
    }

    public func unwatch(_ id: Int32) {
        if polling { looks.withLock { _ = $0.watches.removeValue(forKey: id) }; return }
        inotify_rm_watch(descriptor, id)
    }

    /// Drains pending events; true when there were any.
    /// (Asked on every request that reads a template: one read into a
    /// buffer on the stack, nothing allocated.)
    public func changed() -> Bool {
        var any = false
        drain { _ in any = true }
        return any
    }

    /// Drains pending events; the ids of the watches that saw any.
    public func changes() -> Set<Int32> {
        var ids = Set<Int32>()
        drain { ids.insert($0) }
        return ids
    }

    /// Reads every pending event, telling `seen` the id of each one's watch.
    private func drain(_ seen: (Int32) -> Void) {
        if polling {
            // Looked at outside the lock: a watch may be added meanwhile.
            let paths = looks.withLock { $0.watches.mapValues(\.path) }
            let now = paths.mapValues(DirectoryWatch.look)
            looks.withLock { all in
                for (id, look) in now where all.watches[id].map({ $0.look != look }) == true {
                    all.watches[id]?.look = look
                    seen(id)
                }
            }
            return
        }
        withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: MemoryLayout<inotify_event>.alignment) { buffer in
            while true {
                let n = read(descriptor, buffer.baseAddress, buffer.count)
                if n <= 0 { return }
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= n {
                    let event = UnsafeRawBufferPointer(buffer).loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    seen(event.wd)
                    offset += MemoryLayout<inotify_event>.size + Int(event.len)
                }
            }
        }
    }

    /// What polling compares: the path's own size, times, inode and mode,
    /// and those of each entry of a directory (never through a link); nil
    /// when it is missing.
    static func look(_ path: String) -> [String]? {
        func describe(_ info: stat) -> String {
            "\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec):\(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec):\(info.st_ino):\(info.st_mode)"
        }
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        var look = [describe(info)]
        guard info.st_mode & S_IFMT == S_IFDIR else { return look }
        for name in FileSystem.entries(path) {
            var entry = stat()
            look.append(name + "/" + (lstat(path + "/" + name, &entry) == 0 ? describe(entry) : "gone"))
        }
        return look
    }

    /// Waits up to `milliseconds` for a change or a `wake()`; answers the
    /// ids of the watches that saw a change.
    public func wait(milliseconds: Int32) -> Set<Int32> {
        if polling {
            let deadline = ContinuousClock.now + .milliseconds(max(milliseconds, 0))
            while true {
                let seen = changes()
                let left = deadline - ContinuousClock.now
                if !seen.isEmpty || left <= .zero { return seen }
                let step = min(Int64(DirectoryWatch.pollingMilliseconds), left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                var fd = pollfd(fd: wakePipe.descriptor, events: Int16(POLLIN), revents: 0)
                if poll(&fd, 1, Int32(step)) > 0 {
                    wakePipe.drain()
                    return changes()
                }
            }
        }
        var fds = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: wakePipe.descriptor, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 2, milliseconds)
        wakePipe.drain()
        return changes()
    }

    /// Ends a `wait` on another thread now.
    public func wake() {
        wakePipe.wake()
    }
}
