// SPDX-License-Identifier: Apache-2.0
import Platform
import Synchronization

/// An exclusive `flock(2)` on a file, held until `release()` or the end of
/// the object (and by the kernel until the process ends, however it ends:
/// a `kill -9` never leaves a stale lock). The file holds the holder's pid,
/// to name it in the refusal of the next one.
public final class FileLock: Sendable {
    private let descriptor: Mutex<Int32>

    private init(descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    /// The lock, or `.heldBy(pid)` when another open file holds it (another
    /// process, or another lock of this process on the same file).
    public enum Acquisition {
        case acquired(FileLock)
        case heldBy(pid: Int32?)
    }

    public static func acquire(_ path: String) throws -> Acquisition {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileSystem.Failure("cannot open", path) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            defer { close(fd) }
            guard code == EWOULDBLOCK else { throw FileSystem.Failure("cannot lock", path, code) }
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            let pid = n > 0 ? Int32(String(decoding: buffer[0..<n], as: UTF8.self).filter(\.isNumber)) : nil
            return .heldBy(pid: pid)
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return .acquired(FileLock(descriptor: fd))
    }

    /// Waits for the lock on `path`, however long another holder keeps it.
    /// A holder may remove the file before it lets go (the folder it guards
    /// is gone): the lock won is then on a file no longer at `path`, so the
    /// wait starts again on the file that is there now.
    public static func wait(_ path: String) throws -> FileLock {
        while true {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw FileSystem.Failure("cannot open", path) }
            var code: Int32 = 0
            repeat { code = flock(fd, LOCK_EX) == 0 ? 0 : errno } while code == EINTR
            guard code == 0 else { close(fd); throw FileSystem.Failure("cannot lock", path, code) }
            var held = stat(), named = stat()
            if fstat(fd, &held) == 0, stat(path, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                return FileLock(descriptor: fd)
            }
            close(fd)
        }
    }

    public func release() {
        let fd = descriptor.withLock { fd in defer { fd = -1 }; return fd }
        if fd >= 0 { close(fd) } // closing the last descriptor of the open file drops the flock
    }

    deinit { release() }
}
