// SPDX-License-Identifier: Apache-2.0
import CSystem
import Platform

/// A directory held open by descriptor for the length of a closure: its
/// entries are made, measured and removed relative to it, so the directory's
/// path is looked up once rather than once per file (a store's files are
/// five components below the root), and a link swapped in for the directory
/// is never followed.
public struct OpenDirectory: Sendable {
    public let fd: Int32
    /// Its path, for messages.
    public let path: String

    /// Makes the directory (which must not exist), private to the server
    /// until `setAccess`, and runs `body` with it open.
    public static func making<T>(_ path: String, _ body: (OpenDirectory) throws -> T) throws -> T {
        guard mkdir(path, 0o700) == 0 else { throw FileSystem.Failure("cannot create directory", path) }
        return try opening(path, body)
    }

    /// Runs `body` with the directory at `path` open; a link there is refused (ELOOP).
    public static func opening<T>(_ path: String, _ body: (OpenDirectory) throws -> T) throws -> T {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystem.Failure("cannot open", path) }
        defer { close(fd) }
        return try body(OpenDirectory(fd: fd, path: path))
    }

    /// Sets the directory's own permission bits (setgid included) and, when
    /// `group` is given, its group.
    public func setAccess(mode: Int, group: UInt32?) throws {
        try FileSystem.setAccess(fd: fd, mode: mode, group: group, path: path)
    }

    /// Copies the file `source` into the new entry `name`, with the bits
    /// `mode` and the group `group`; answers the bytes copied. `synced`:
    /// the copy is on disk before it returns.
    @discardableResult
    public func copy(from source: String, as name: String, mode: Int, group: UInt32?, synced: Bool = false) throws -> Int64 {
        try copy(from: source, as: name, mode: mode, group: group, synced: synced) { _, _ in nil }.bytes
    }

    /// `copy` of an SQLite database, its times set a second back
    /// (`FileSystem.backdate`), with its `FileSystem.databaseSignature`,
    /// read through the descriptors at hand.
    public func copyDatabase(from source: String, as name: String, mode: Int, group: UInt32?, synced: Bool = false) throws -> (bytes: Int64, signature: String?) {
        try copy(from: source, as: name, mode: mode, group: group, synced: synced) { input, output in
            FileSystem.backdate(fd: output)
            return FileSystem.databaseSignature(copy: output, of: input)
        }
    }

    private func copy(from source: String, as name: String, mode: Int, group: UInt32?, synced: Bool,
                      finish: (_ input: Int32, _ output: Int32) -> String?) throws -> (bytes: Int64, signature: String?) {
        let input = try FileSystem.openForReading(source)
        defer { close(input) }
        let output = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw FileSystem.Failure("cannot create", path + "/" + name) }
        var ok = false
        defer {
            close(output)
            if !ok { unlinkat(fd, name, 0) }
        }
        try FileSystem.setAccess(fd: output, mode: mode, group: group, path: path + "/" + name)
        let size = try FileSystem.copyContents(input, to: output, source: source)
        let signature = finish(input, output)
        if synced { try FileSystem.sync(output, path: path + "/" + name, dataOnly: true) }
        ok = true
        return (size, signature)
    }

    /// A second name `name` for the file `source` (a hard link), or a copy
    /// where the file system will not link it.
    public func link(_ source: String, as name: String) throws {
        if linkat(AT_FDCWD, source, fd, name, 0) == 0 { return }
        guard errno == EXDEV || errno == EPERM || errno == EMLINK else { throw FileSystem.Failure("cannot link \(source) to", path + "/" + name) }
        try copy(from: source, as: name, mode: 0o444, group: nil)
    }

    /// What the entry `name` is, without following a link.
    public func entry(_ name: String) -> FileSystem.Entry { entryAndSize(name).entry }

    /// What the entry `name` is, without following a link, and its size in
    /// bytes (0 when it is missing), from one `fstatat`.
    public func entryAndSize(_ name: String) -> (entry: FileSystem.Entry, size: Int64) {
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return (.missing, 0) }
        return (FileSystem.Entry(info), Int64(info.st_size))
    }

    /// The size of the entry `name` in bytes, 0 when it is missing.
    public func size(_ name: String) -> Int64 {
        var info = stat()
        return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? Int64(info.st_size) : 0
    }

    /// The sizes of `names` added up, each in the folder `folder` below
    /// this directory when given (0 for one missing). Their paths are made
    /// on the stack, not as strings: a listing asks this of thousands of stores.
    public func totalSize(in folder: String?, of names: [StaticString]) -> Int64 {
        var folder = folder ?? ""
        let longest = names.map(\.utf8CodeUnitCount).max() ?? 0
        return folder.withUTF8 { prefix in
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: prefix.count + 1 + longest + 1) { path in
                var start = 0
                for byte in prefix { path[start] = CChar(bitPattern: byte); start += 1 }
                if !prefix.isEmpty { path[start] = CChar(UInt8(ascii: "/")); start += 1 }
                var total: Int64 = 0
                for name in names {
                    var at = start
                    name.withUTF8Buffer { for byte in $0 { path[at] = CChar(bitPattern: byte); at += 1 } }
                    path[at] = 0
                    var info = stat()
                    if fstatat(fd, path.baseAddress!, &info, AT_SYMLINK_NOFOLLOW) == 0 { total += Int64(info.st_size) }
                }
                return total
            }
        }
    }

    /// Removes the entry `name` (not a directory); false when it was not there or could not go.
    @discardableResult
    public func remove(_ name: String) -> Bool {
        unlinkat(fd, name, 0) == 0
    }
}

/// A directory held open by descriptor for as long as the object lives
/// (the stores' parent, for the registry's life): what is looked up below
/// it through `directory` skips the components above it on every call.
public final class HeldDirectory: Sendable {
    /// The directory, for entries below it (names may be relative paths).
    public let directory: OpenDirectory

    /// Opens the directory at `path`; a link there is refused (ELOOP).
    public init(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystem.Failure("cannot open", path) }
        directory = OpenDirectory(fd: fd, path: path)
    }

    deinit { close(directory.fd) }
}
