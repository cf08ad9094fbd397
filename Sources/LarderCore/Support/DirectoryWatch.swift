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

    enum Outcome { case watching, missing, refused }

    /// Watches `path` (not recursively).
    func watch(_ path: String) -> Outcome {
        let mask = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
        if inotify_add_watch(descriptor, path, mask) >= 0 { return .watching }
        return errno == ENOENT || errno == ENOTDIR ? .missing : .refused
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
