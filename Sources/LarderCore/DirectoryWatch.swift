import Glibc

/// Tells whether anything changed below a few directories since it was last
/// asked, with inotify: one non-blocking read per question instead of a stat
/// of every file.
final class DirectoryWatch {
    private let descriptor: Int32

    init?() {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if descriptor < 0 { return nil }
    }

    deinit { close(descriptor) }

    /// Watches `path` (not recursively); false when the kernel refuses.
    @discardableResult
    func watch(_ path: String) -> Bool {
        let mask = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
        return inotify_add_watch(descriptor, path, mask) >= 0 || errno == ENOENT
    }

    /// Drains pending events; true when there were any.
    func changed() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var any = false
        while true {
            let n = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if n > 0 { any = true; continue }
            return any
        }
    }
}
