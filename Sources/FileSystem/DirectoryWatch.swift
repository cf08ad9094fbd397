// SPDX-License-Identifier: Apache-2.0
import Platform

/// inotify watches on directories (not recursive): whether anything changed
/// below them since last asked, which ones, and a wait for the next change
/// that another thread can cut short. One non-blocking read answers what a
/// stat of every file would.
public final class DirectoryWatch: @unchecked Sendable {
    private let descriptor: Int32
    private let wakePipe: WakePipe

    public init?() {
        guard let pipe = WakePipe() else { return nil }
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if descriptor < 0 { return nil }
        wakePipe = pipe
    }

    deinit {
        close(descriptor)
    }

    public enum Watch: Sendable, Equatable { case watching(Int32), missing, refused }

    /// What is watched: `everything` (files made, changed, moved, removed) or
    /// `writes` (a database and its WAL being written).
    public enum Events: Sendable {
        case everything, writes
        var mask: UInt32 {
            switch self {
            case .everything: return UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
            case .writes: return UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE)
            }
        }
    }

    /// Watches `path`; `.watching` carries the watch's id.
    @discardableResult
    public func watch(_ path: String, for events: Events = .everything) -> Watch {
        let id = inotify_add_watch(descriptor, path, events.mask)
        if id >= 0 { return .watching(id) }
        return errno == ENOENT || errno == ENOTDIR ? .missing : .refused
    }

    public func unwatch(_ id: Int32) {
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

    /// Waits up to `milliseconds` for a change or a `wake()`; answers the
    /// ids of the watches that saw a change.
    public func wait(milliseconds: Int32) -> Set<Int32> {
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
