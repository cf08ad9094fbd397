import Glibc

/// A request body too large to keep in memory, written to a file in the
/// server's spool directory as it arrived. The file is removed when the
/// last reference goes, unless it was moved away first.
public final class SpooledBody: @unchecked Sendable {
    public let path: String
    public let size: Int

    init(path: String, size: Int) {
        self.path = path
        self.size = size
    }

    deinit { unlink(path) }

    /// The whole body in memory (for bodies that must be parsed whole).
    public func readAll() throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SpoolError(errno: errno, what: "cannot open \(path)") }
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, size - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SpoolError(errno: errno, what: "cannot read \(path)") }
            done += n
        }
        return out
    }
}

public struct SpoolError: Error, CustomStringConvertible {
    public let errno: Int32
    let what: String
    public var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }
    public var description: String { "\(what): \(String(cString: strerror(errno)))" }
}

/// Writes a body to a new file as its chunks arrive.
final class Spool: @unchecked Sendable {
    let path: String
    private var fd: Int32
    private(set) var size = 0
    private var handedOver = false

    init(directory: String) throws {
        var generator = SystemRandomNumberGenerator()
        path = directory + "/upload-" + String(generator.next() as UInt64, radix: 16) + String(generator.next() as UInt64, radix: 16)
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SpoolError(errno: errno, what: "cannot create \(path)") }
    }

    deinit {
        if fd >= 0 { close(fd) }
        if !handedOver { unlink(path) }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var written = 0
        while written < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SpoolError(errno: errno, what: "cannot write \(path)") }
            written += n
        }
        size += bytes.count
    }

    /// Closes the file and hands it to a `SpooledBody`, which owns it from now on.
    func finish() -> SpooledBody {
        close(fd)
        fd = -1
        handedOver = true
        return SpooledBody(path: path, size: size)
    }
}
