// SPDX-License-Identifier: Apache-2.0
import FileSystem
import Platform

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

    deinit { FileSystem.remove(path) }

    /// The whole body in memory (for bodies that must be parsed whole).
    public func readAll() throws -> [UInt8] {
        try ReadableFile(path: path).read(count: size, at: 0)
    }
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
        fd = try FileSystem.createPrivate(path)
    }

    deinit {
        if fd >= 0 { close(fd) }
        if !handedOver { FileSystem.remove(path) }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try FileSystem.writeAll(fd, bytes, path: path)
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
