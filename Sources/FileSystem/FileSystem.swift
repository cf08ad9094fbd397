// SPDX-License-Identifier: Apache-2.0
import CSystem
import Platform

/// Small POSIX file helpers. Nothing here follows a symbolic link when it
/// removes, and nothing removes outside the directory it is given.
public enum FileSystem {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// The errno behind it.
        public let code: Int32
        public init(_ what: String, _ path: String, _ code: Int32 = errno) {
            description = "\(what) \(path): \(String(cString: strerror(code)))"
            self.code = code
        }

        /// The file system is full, or the user's quota on it is.
        public var isOutOfSpace: Bool { code == ENOSPC || code == EDQUOT }
        /// A directory on the way is not there.
        public var isMissing: Bool { code == ENOENT }
        /// A file changed under a reader that needed it still.
        public static func changed(_ what: String, _ path: String) -> Failure { Failure(what, path, EBUSY) }
        /// A descriptor that cannot be used for it.
        public static func unusableDescriptor(_ what: String, _ path: String) -> Failure { Failure(what, path, EBADF) }
    }

    /// Copies a whole file sharing its blocks where the file system can
    /// (FICLONE), else with `copy_file_range` (no bytes through user
    /// space). The target must not exist.
    /// `followingLinks: false` refuses a source that is a symbolic link (a
    /// file in a directory someone else may write).
    public static func copyFile(from source: String, to target: String, followingLinks: Bool = true) throws {
        let input = try openForReading(source, followingLinks: followingLinks)
        defer { close(input) }
        try copyFile(from: input, named: source, to: target) { false }
    }

    /// Copies the whole file open as `input` (`source` names it in errors)
    /// to the new file `target`, as `copyFile` does, 4 MiB at a time:
    /// once `stop` answers true, it stops, removes `target` and throws.
    /// `input` is read at offsets, never moved: it may be a descriptor SQLite
    /// reads the file with (see `Connection.databaseDescriptor`), shared by
    /// copies made at once.
    public static func copyFile(from input: Int32, named source: String, to target: String, stop: () -> Bool) throws {
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw Failure("cannot create", target) }
        var ok = false
        defer {
            close(output)
            if !ok { unlink(target) }
        }
        try copyContents(input, to: output, source: source, step: 4 << 20, stop: stop)
        ok = true
    }

    /// Copies the file open as `input` (at the size it has now, from its
    /// start, whatever its position) to `output`, `step` bytes a call,
    /// asking `stop` before each; answers the bytes copied.
    @discardableResult
    static func copyContents(_ input: Int32, to output: Int32, source: String, step: Int = Int.max,
                             stop: () -> Bool = { false }) throws -> Int64 {
        var info = stat()
        guard fstat(input, &info) == 0 else { throw Failure("cannot stat", source) }
        // Portable: read and write through user space (Darwin: fcopyfile or clonefile, docs/macos.md).
        if Syscalls.portable {
            return try copyByReading(input, from: 0, to: output, source: source, limit: Int64(info.st_size), step: step, stop: stop)
        }
        if info.st_size > 0 {
            if stop() { throw Failure("stopped copying", source, ECANCELED) }
            // One call where the file system shares blocks (a 1 GB copy in
            // well under a millisecond, taking no room); else bytes are copied.
            let cloned = larder_clone_file(input, output)
            if cloned == 0 {
                var copied = stat()
                guard fstat(output, &copied) == 0 else { throw Failure("cannot stat the copy of", source) }
                return Int64(copied.st_size)
            }
            // Emptied only after a clone that failed half way: ext4 writes a file
            // truncated to nothing to disk when it is closed, and a copy nobody syncs
            // should stay in memory (500 copies of 53 KB: no write without it, 26 MB with it).
            if ![EOPNOTSUPP, EXDEV, EINVAL, ENOTTY, ENOSYS, EBADF].contains(cloned) {
                guard ftruncate(output, 0) == 0 else { throw Failure("cannot truncate the copy of", source) }
            }
        }
        var remaining = Int(info.st_size), offset: Int64 = 0
        while remaining > 0 {
            if stop() { throw Failure("stopped copying", source, ECANCELED) }
            let n = Int(larder_copy_file_range_at(input, &offset, output, min(remaining, step)))
            if n > 0 { remaining -= n; continue }
            if n == 0 { break }
            if errno == EINTR { continue }
            if errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP {
                return offset + (try copyByReading(input, from: offset, to: output, source: source))
            }
            throw Failure("cannot copy", source)
        }
        return offset
    }

    /// Makes the file open (for writing) as `output` hold what the file
    /// open as `input` holds, in place (its inode stays), sharing `input`'s
    /// blocks. False where the file system cannot (`output` is then
    /// unchanged, or, after a clone that failed half way, to be written
    /// whole again). Portable: false.
    public static func cloneInPlace(from input: Int32, into output: Int32) -> Bool {
        if Syscalls.portable { return false }
        var info = stat()
        guard fstat(input, &info) == 0, larder_clone_file(input, output) == 0 else { return false }
        return ftruncate(output, info.st_size) == 0
    }

    /// Copies from `start` of `input` to `output` with pread and write, up
    /// to `limit` bytes or the end, `step` bytes at most between two
    /// questions to `stop`; answers the bytes copied.
    private static func copyByReading(_ input: Int32, from start: Int64, to output: Int32, source: String,
                                      limit: Int64 = .max, step: Int = Int.max, stop: () -> Bool = { false }) throws -> Int64 {
        var buffer = [UInt8](repeating: 0, count: min(1 << 20, max(step, 1)))
        var copied: Int64 = 0
        while copied < limit {
            if stop() { throw Failure("stopped copying", source, ECANCELED) }
            let count = Int(min(Int64(buffer.count), limit - copied))
            let n = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, count, off_t(start + copied)) }
            if n == 0 { return copied }
            if n < 0 { if errno == EINTR { continue }; throw Failure("cannot read", source) }
            try buffer.withUnsafeBytes { try writeAll(output, UnsafeRawBufferPointer(rebasing: $0[0..<n]), path: source) }
            copied += Int64(n)
        }
        return copied
    }

    /// Writes every byte of `bytes` to `fd` (at `offset`, or where the file
    /// stands), retrying short writes.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int? = nil, path: String) throws {
        var written = 0
        while written < bytes.count {
            let n = offset.map { pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t($0 + written)) }
                ?? write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure("cannot write", path)
            }
            written += n
        }
    }

    /// Creates a new file (which must not exist), readable and writable by its owner only; answers its descriptor.
    public static func createPrivate(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot create", path) }
        return fd
    }

    /// Writes `bytes` to a new file at `path` (which must not exist), with
    /// the bits `mode` (less the umask's).
    /// `synced`: on disk before it returns.
    public static func writeFile(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644, synced: Bool = false) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Failure("cannot create", path) }
        defer { close(fd) }
        try bytes.withUnsafeBytes { try writeAll(fd, $0, path: path) }
        if synced { try sync(fd, path: path, dataOnly: true) }
    }

    /// Writes `bytes` to a temporary file beside `path`, then renames it
    /// over `path`; `synced`: the file and the rename on disk before it returns.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644, synced: Bool = false) throws {
        let temporary = path + ".tmp"
        unlink(temporary) // a leftover of an earlier crash
        do {
            try writeFile(bytes, to: temporary, mode: mode, synced: synced)
            guard Platform.rename(temporary, path) == 0 else { throw Failure("cannot rename", temporary) }
            if synced { try sync(parent(path)) }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// The whole file: read at the size it has (a store's record, a
    /// fixture), then on while it grows.
    public static func readFile(_ path: String) throws -> [UInt8] {
        let fd = try openForReading(path)
        defer { close(fd) }
        var info = stat()
        let expected = fstat(fd, &info) == 0 ? Int(info.st_size) : 0
        var out = [UInt8](repeating: 0, count: max(expected, 4096) + 1)
        var have = 0
        while true {
            if have == out.count { out += [UInt8](repeating: 0, count: out.count) }
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + have, $0.count - have) }
            if n == 0 { break }
            if n < 0 { if errno == EINTR { continue }; throw Failure("cannot read", path) }
            have += n
        }
        out.removeSubrange(have...)
        return out
    }

    /// Removes a file; a missing one is fine.
    public static func remove(_ path: String) {
        unlink(path)
    }

    /// What SQLite names a database's files by, after the database's own
    /// name: the file itself, its WAL, shared memory and rollback journal.
    public static let databaseSuffixes = ["", "-wal", "-shm", "-journal"]

    /// Removes a SQLite database file and its journal, WAL and shared memory.
    public static func removeDatabase(_ path: String) {
        for suffix in databaseSuffixes { unlink(path + suffix) }
    }

    /// Renames a file or a directory (same file system).
    public static func rename(_ source: String, to target: String) throws {
        guard Platform.rename(source, target) == 0 else { throw Failure("cannot move \(source) to", target) }
    }

    /// Removes an empty directory; false when it is not empty (or not there).
    @discardableResult
    public static func removeEmptyDirectory(_ path: String) -> Bool {
        rmdir(path) == 0
    }

    /// Read-only for everyone (template cache files: nothing writes them again).
    public static func makeReadOnly(_ path: String) {
        chmod(path, 0o444)
    }

    /// Sets the permission bits of `path` (setgid included) and, when
    /// `group` is given, its group. Never follows a symbolic link.
    /// What is already so is left alone (a root someone else owns may already be right).
    public static func setAccess(_ path: String, mode: Int, group: UInt32?) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Failure("cannot read", path) }
        guard (info.st_mode & S_IFMT) != S_IFLNK else { return }
        if let group, info.st_gid != group, lchown(path, UInt32.max, group) != 0 { throw Failure("cannot give the group \(group)", path) }
        // chown clears setgid: set the bits after it.
        if Int(info.st_mode & 0o7777) != mode || group != nil, chmod(path, mode_t(mode)) != 0 { throw Failure("cannot set the mode of", path) }
    }

    /// Sets the permission bits (setgid included) and, when `group` is
    /// given, the group of the file or directory open as `fd`.
    public static func setAccess(fd: Int32, mode: Int, group: UInt32?, path: String) throws {
        if let group, fchown(fd, UInt32.max, group) != 0 { throw Failure("cannot give the group \(group)", path) }
        // chown clears setgid: set the bits after it.
        guard fchmod(fd, mode_t(mode)) == 0 else { throw Failure("cannot set the mode of", path) }
    }

    /// The id of a group given by name or number, or nil when there is no such group.
    public static func groupID(_ nameOrNumber: String) -> UInt32? {
        if let number = UInt32(nameOrNumber) { return number }
        var entry = group()
        var found: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let rc = getgrnam_r(nameOrNumber, &entry, &buffer, buffer.count, &found)
        return rc == 0 && found != nil ? entry.gr_gid : nil
    }

    /// The file's permission bits, or nil when it is missing.
    /// This process's user id.
    public static var userID: UInt32 { getuid() }

    /// A directory's owner and mode bits (the sticky bit's too), read
    /// without following a link: nil for a link or anything else.
    public static func directoryOwnership(_ path: String) -> (owner: UInt32, mode: Int)? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return nil }
        return (info.st_uid, Int(info.st_mode & 0o7777))
    }

    public static func permissions(_ path: String) -> Int? {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_mode & 0o7777) : nil
    }

    /// What changes whenever the file open as `descriptor` is written: its
    /// size, its times of change, its inode.
    public static func signature(descriptor: Int32) -> String? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return "\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec):\(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec):\(info.st_ino)"
    }

    /// What an SQLite database open as `fd` and its WAL `wal` hold, as far
    /// as a commit must change it: the file's inode, size and times, its
    /// header's change counter and page count (every rollback-journal commit
    /// moves the counter), and the WAL's size, times and header (every WAL
    /// commit appends a frame, and a WAL started again has new salts). An
    /// empty WAL and none are the same. `fd` is only read at an offset, so
    /// it may be SQLite's own (`Connection.databaseDescriptor`).
    public static func databaseSignature(fd: Int32, wal: String) -> String? {
        guard let database = describe(fd, header: fd) else { return nil }
        guard let log = try? openForReading(wal, followingLinks: false) else { return FileSystem.exists(wal) ? nil : database + "|-" }
        defer { close(log) }
        guard let frames = describe(log, header: log, count: 32, at: 0) else { return nil }
        return database + "|" + (frames.hasPrefix("0:") ? "-" : frames) // (a signature starts with the size)
    }

    /// `databaseSignature` of a database just copied into `copy` from
    /// `original` (its header read there), before any WAL can be beside it.
    public static func databaseSignature(copy: Int32, of original: Int32) -> String? {
        describe(copy, header: original).map { $0 + "|-" }
    }

    /// The `signature(descriptor:)` of `fd` and `count` bytes from `offset` of `header`, as text.
    private static func describe(_ fd: Int32, header: Int32, count: Int = 8, at offset: off_t = 24) -> String? {
        var bytes = [UInt8](repeating: 0, count: count)
        guard let file = signature(descriptor: fd), bytes.withUnsafeMutableBytes({ pread(header, $0.baseAddress, count, offset) }) >= 0 else { return nil }
        return file + ":" + bytes.map { String($0, radix: 16) }.joined(separator: ".")
    }

    /// Size, modification time and inode: changes whenever the file is written or replaced.
    public static func signature(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return "\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec):\(info.st_ino)"
    }

    /// A plain file opened for reading, its descriptor. Opened without
    /// blocking and then checked: a test may put a FIFO (whose open blocks
    /// until a writer comes) or a device in place of a file of its store.
    public static func openForReading(_ path: String, followingLinks: Bool = true) throws -> Int32 {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { throw Failure("cannot open", path) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw Failure("cannot open", path + " (not a plain file)", EINVAL)
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    /// Whether a descriptor (2: standard error) is a terminal.
    public static func isTerminal(_ descriptor: Int32) -> Bool {
        isatty(descriptor) != 0
    }

    /// Up to `count` bytes from the start of a file.
    public static func readPrefix(_ path: String, count: Int) throws -> [UInt8] {
        let fd = try openForReading(path)
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: count)
        let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, 0) }
        guard n >= 0 else { throw Failure("cannot read", path) }
        return Array(out.prefix(n))
    }

    /// Exactly `count` bytes at `offset` of the file open as `fd`, or nil.
    public static func bytes(of fd: Int32, at offset: Int64, count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        return out.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, count, off_t(offset)) }) == count ? out : nil
    }

    /// A second name for an immutable file (a hard link: no bytes copied, and
    /// the file lives on while either name does), or a copy where the file
    /// system will not link (another device, a protected link).
    public static func linkOrCopy(_ source: String, to target: String) throws {
        if link(source, target) == 0 { return }
        guard errno == EXDEV || errno == EPERM || errno == EMLINK else { throw Failure("cannot link \(source) to", target) }
        try copyFile(from: source, to: target)
    }

    /// Renames a file or a directory to `target`, which must not exist
    /// (`RENAME_NOREPLACE`, or a look first where the file system has no such flag).
    public static func renameNew(_ source: String, to target: String) throws {
        if Syscalls.portable { return try renameNewPortably(source, to: target) }
        if larder_rename_noreplace(source, target) == 0 { return }
        guard errno == EINVAL || errno == ENOSYS else { throw Failure("cannot move \(source) to", target) }
        guard !exists(target) else { throw Failure("cannot move \(source) to", target, EEXIST) }
        try rename(source, to: target)
    }

    /// `renameNew` in POSIX calls alone (Darwin: renamex_np with RENAME_EXCL,
    /// docs/macos.md): a file gets its new name by `link`, which fails with
    /// EEXIST rather than replace, and loses the old one; a directory (which
    /// cannot be linked) is renamed over an empty directory made for it by
    /// `mkdir`, which fails with EEXIST the same way.
    static func renameNewPortably(_ source: String, to target: String) throws {
        var info = stat()
        guard lstat(source, &info) == 0 else { throw Failure("cannot move \(source) to", target) }
        if info.st_mode & S_IFMT == S_IFDIR {
            guard mkdir(target, 0o700) == 0 else { throw Failure("cannot move \(source) to", target) }
            guard Platform.rename(source, target) == 0 else {
                let code = errno
                rmdir(target)
                throw Failure("cannot move \(source) to", target, code)
            }
            return
        }
        guard linkat(AT_FDCWD, source, AT_FDCWD, target, 0) == 0 else { throw Failure("cannot move \(source) to", target) }
        guard unlink(source) == 0 else {
            let code = errno
            unlink(target)
            throw Failure("cannot move \(source) to", target, code)
        }
    }

    /// Moves a file with `rename`, or by copying across file systems.
    public static func move(_ source: String, to target: String) throws {
        if Platform.rename(source, target) == 0 { return }
        guard errno == EXDEV else { throw Failure("cannot move \(source) to", target) }
        try copyFile(from: source, to: target)
        unlink(source)
    }

    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// A plain file itself, not a symbolic link to one.
    public static func isPlainFile(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// What a path that someone else may have planted is, as `lstat` sees it.
    public enum Entry: Equatable, Sendable {
        case missing
        /// A plain file with this one name.
        case ownFile
        /// A symbolic link, a directory, a device, or a plain file with a
        /// second name elsewhere (a hard link to another's file): in words.
        case foreign(String)

        /// What `lstat` (or `fstatat` without following) found.
        init(_ info: stat) {
            switch info.st_mode & S_IFMT {
            case S_IFREG: self = info.st_nlink == 1 ? .ownFile : .foreign("a hard link to a file that has another name")
            case S_IFLNK: self = .foreign("a symbolic link")
            case S_IFDIR: self = .foreign("a directory")
            default: self = .foreign("not a plain file")
            }
        }
    }

    public static func entry(_ path: String) -> Entry {
        var info = stat()
        return lstat(path, &info) == 0 ? Entry(info) : .missing
    }

    /// `followingLinks: false`: a link to a directory is not one.
    public static func isDirectory(_ path: String, followingLinks: Bool = true) -> Bool {
        var info = stat()
        return (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Size in bytes, or 0 when the file is missing.
    public static func size(_ path: String) -> Int64 {
        var info = stat()
        return lstat(path, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// When the file was last written (or touched), in seconds since 1970; nil when it is missing.
    public static func modifiedAt(_ path: String) -> Double? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }

    /// Sets the file's modification time to now (a recency mark other processes can read).
    public static func touch(_ path: String) {
        _ = utimensat(AT_FDCWD, path, nil, 0)
    }

    /// Sets the modification time of the file open as `fd` a second back:
    /// any write after it then moves the time, however coarse the kernel's
    /// clock (a `databaseSignature` taken just after a copy).
    public static func backdate(fd: Int32) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        now.tv_sec -= 1
        var times = [now, now]
        _ = futimens(fd, &times)
    }

    /// Whether the file open as `fd` was last written at least `seconds`
    /// ago: a write after now then surely moves its time (a kernel without
    /// fine-grained timestamps keeps a clock tick of a few milliseconds).
    public static func lastWritten(_ fd: Int32, atLeast seconds: Double) -> Bool {
        var info = stat(), now = timespec()
        guard fstat(fd, &info) == 0, clock_gettime(CLOCK_REALTIME, &now) == 0 else { return false }
        let age = Double(now.tv_sec - info.st_mtim.tv_sec) + Double(now.tv_nsec - info.st_mtim.tv_nsec) / 1e9
        return age >= seconds
    }

    /// The names in a directory, sorted; empty when it cannot be read.
    public static func entries(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    public static func makeDirectory(_ path: String, mode: Int = 0o755) throws {
        if mkdir(path, mode_t(mode)) != 0 && errno != EEXIST { throw Failure("cannot create directory", path) }
    }

    /// A directory only its owner may list or enter (0700), made or, when
    /// an older version made it open to others, closed (a link is left as
    /// it is: it is no directory of this root's).
    public static func makePrivateDirectory(_ path: String) throws {
        if mkdir(path, 0o700) == 0 { return }
        guard errno == EEXIST else { throw Failure("cannot create directory", path) }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Failure("cannot read", path) }
        if info.st_mode & S_IFMT == S_IFDIR, info.st_mode & 0o7077 != 0, chmod(path, 0o700) != 0 { throw Failure("cannot set the mode of", path) }
    }

    /// Asks ext4 to place each new subdirectory of `path` (and later the
    /// files made in it) in the block group with the fewest directories
    /// rather than in `path`'s own (`chattr +T`), where ext4 runs without a
    /// journal: there, allocating an inode steps over every inode of its
    /// group freed in the last minutes (`recently_deleted` in the kernel's
    /// ialloc.c), so churn concentrated in one group makes every mkdir and
    /// create of it scan thousands. With a journal no such scan happens and
    /// the flag would only cost a look at every group per mkdir, so it is
    /// set only without one. Best effort: false when not set.
    @discardableResult
    public static func spreadSubdirectories(_ path: String) -> Bool {
        guard skipsRecentlyFreedInodes(path) else { return false }
        return (try? OpenDirectory.opening(path) { larder_mark_top_directory($0.fd) == 0 }) ?? false
    }

    /// Whether `path` is on ext4 mounted without a journal: its kernel
    /// state says `journal_task` "<none>" (/sys/fs/ext4/DEVICE).
    /// Portable: no ext4 to ask, so no (and nothing to spread).
    public static func skipsRecentlyFreedInodes(_ path: String) -> Bool {
        if Syscalls.portable { return false }
        var fs = statfs()
        guard statfs(path, &fs) == 0, fs.f_type == 0xEF53 else { return false }
        var major: UInt32 = 0, minor: UInt32 = 0
        guard larder_device_numbers(path, &major, &minor) == 0,
              let device = symbolicLinkTarget("/sys/dev/block/\(major):\(minor)").map(lastComponent),
              let task = try? readPrefix("/sys/fs/ext4/" + device + "/journal_task", count: 64) else { return false }
        return String(decoding: task, as: UTF8.self).split(whereSeparator: \.isWhitespace).first == "<none>"
    }

    /// What the symbolic link `path` says, or nil.
    private static func symbolicLinkTarget(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        return count > 0 && count < buffer.count ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }

    /// Whether `path` spreads its subdirectories (see `spreadSubdirectories`);
    /// nil where its file system keeps no such flag (portable: FS_IOC_GETFLAGS is Linux's).
    public static func spreadsSubdirectories(_ path: String) -> Bool? {
        if Syscalls.portable { return nil }
        return (try? OpenDirectory.opening(path) { larder_is_top_directory($0.fd) }).flatMap { $0 < 0 ? nil : $0 == 1 }
    }

    /// `mkdir -p`: each missing directory on the way, with errors that name
    /// the path and the reason ("Not a directory", "Permission denied").
    public static func makeDirectories(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST { throw Failure("cannot create directory", prefix) }
        }
        guard isDirectory(path) else { throw Failure("cannot create directory", path, ENOTDIR) }
    }

    /// Removes `path` and everything below it, refusing anything that is not
    /// inside `root`. Symbolic links are removed, never followed.
    public static func removeTree(_ path: String, within root: String) throws {
        guard path.hasPrefix(root + "/"), !path.contains("/../"), !path.hasSuffix("/..") else {
            throw Failure("refusing to remove outside the root:", path, EPERM)
        }
        try removeTree(path)
    }

    /// How deep the walk goes holding a descriptor per level; a directory
    /// deeper than this is moved up to the top and removed from there.
    static let removalDepth = 32

    /// Removes `path` and everything below it by descriptor: every directory
    /// is opened relative to its parent's descriptor with `O_NOFOLLOW |
    /// O_DIRECTORY` and its entries are unlinked relative to it, so a
    /// directory that a test swaps for a link while the walk runs is removed
    /// as the link, never followed, and nothing outside the tree is touched.
    /// The top is the server's own (a store directory it renamed into the
    /// trash), opened without following a link either.
    private static func removeTree(_ path: String) throws {
        let top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else {
            if errno == ENOENT { return }
            // A file, or a link: removed as itself.
            guard errno == ENOTDIR || errno == ELOOP else { throw Failure("cannot open", path) }
            if unlink(path) != 0 && errno != ENOENT { throw Failure("cannot remove", path) }
            return
        }
        defer { close(top) }
        // Pass after pass while there is more (deep directories moved up,
        // entries a test added meanwhile), as long as each pass removes something.
        var parked = 0
        for _ in 0..<100_000 {
            var removed = 0
            guard try empty(top, depth: 0, top: top, parked: &parked, removed: &removed, path: path), removed > 0 else { break }
        }
        if rmdir(path) != 0 && errno != ENOENT { throw Failure("cannot remove", path) }
    }

    /// Removes every entry of the directory open as `fd`; answers whether
    /// anything is left to do (a deep directory moved up to `top`, or an
    /// entry that appeared meanwhile).
    private static func empty(_ fd: Int32, depth: Int, top: Int32, parked: inout Int, removed: inout Int, path: String) throws -> Bool {
        var again = false
        for name in try names(fd, path: path) {
            if unlinkat(fd, name, 0) == 0 { removed += 1; continue }
            if errno == ENOENT { continue }
            guard errno == EISDIR else { throw Failure("cannot remove", path + "/…/" + name) }
            if depth + 1 >= removalDepth {
                parked += 1
                if renameat(fd, name, top, ".deep-\(parked)-\(UInt32.random(in: 0...UInt32.max))") != 0 && errno != ENOENT {
                    throw Failure("cannot move up", path + "/…/" + name)
                }
                removed += 1
                again = true
                continue
            }
            let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if child < 0 {
                if errno == ENOENT { continue }
                // Swapped for a link or a file since it was seen: that goes, as itself.
                guard errno == ENOTDIR || errno == ELOOP else { throw Failure("cannot open", path + "/…/" + name) }
                if unlinkat(fd, name, 0) == 0 { removed += 1 } else if errno != ENOENT { again = true }
                continue
            }
            do {
                defer { close(child) }
                if try empty(child, depth: depth + 1, top: top, parked: &parked, removed: &removed, path: path) { again = true }
            }
            if unlinkat(fd, name, AT_REMOVEDIR) == 0 { removed += 1; continue }
            if errno != ENOENT {
                guard errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR else { throw Failure("cannot remove", path + "/…/" + name) }
                again = true
            }
        }
        return again
    }

    /// The entry names of the directory open as `fd` (without `.` and `..`).
    private static func names(_ fd: Int32, path: String) throws -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw Failure("cannot list", path)
        }
        defer { closedir(dir) }
        // The copy shares its offset with `fd`, which an earlier listing left at the end.
        rewinddir(dir)
        var out: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { out.append(name) }
        }
        return out
    }

    /// Whether a file in the folder `from` copies into the folder `into`
    /// sharing its blocks (see `copyFile`): asked of the file system with a
    /// small file of each, removed after. Portable: no (Darwin's clonefile
    /// is not called, docs/macos.md).
    public static func sharesBlocks(from: String, into: String) -> Bool {
        if Syscalls.portable { return false }
        let name = "/.larder-clone-probe-\(getpid())"
        let source = from + name + "-a", target = into + name + "-b"
        defer { unlink(source); unlink(target) }
        unlink(source)
        unlink(target)
        guard let input = try? createPrivate(source) else { return false }
        defer { close(input) }
        // Whole blocks: some file systems clone only those.
        let block = [UInt8](repeating: 0x4C, count: 64 << 10)
        guard (try? block.withUnsafeBytes({ try writeAll(input, $0, path: source) })) != nil,
              let output = try? createPrivate(target) else { return false }
        defer { close(output) }
        return larder_clone_file(input, output) == 0
    }

    /// The name of the file system holding `path` ("ext4", "xfs", "tmpfs",
    /// ...), or "other" for one not known here. Portable: nil.
    public static func typeName(_ path: String) -> String? {
        if Syscalls.portable { return nil }
        var fs = statfs()
        guard statfs(path, &fs) == 0 else { return nil }
        let names: [Int: String] = [0xEF53: "ext4", 0x5846_5342: "xfs", 0x9123_683E: "btrfs", 0xCA45_1A4E: "bcachefs",
                                    0x0102_1994: "tmpfs", 0x8584_58F6: "ramfs", 0x794C_7630: "overlay", 0x2FC1_2FC1: "zfs",
                                    0x6969: "nfs", 0x6573_5546: "fuse"]
        return names[Int(fs.f_type)] ?? "other"
    }

    /// Bytes free for an unprivileged writer on the file system of `path`, or nil.
    public static func availableBytes(_ path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The folder a path is in, as `dirname` without its dots: "/a/b" is
    /// "/a", "/a" is "/", "b" is "" (trailing slashes ignored).
    public static func parent(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// A path's last component: "/a/b/" is "b".
    public static func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? (path.hasPrefix("/") ? "/" : "")
    }

    /// Writes `text` whole to standard output or error (what `print` cannot
    /// do for standard error, and does for output only through its buffer);
    /// a closed stream loses it.
    public static func writeText(_ text: String, to descriptor: Int32) {
        var text = text
        text.withUTF8 { try? writeAll(descriptor, UnsafeRawBufferPointer($0), path: "a standard stream") }
    }

    public static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
