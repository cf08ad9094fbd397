// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import Glibc
import Synchronization

/// The stores' records, one JSON line each appended to one file in the root
/// (`stores.journal`), the last line of an id winning: making a store or
/// changing its record is one `write(2)` on a descriptor held open, with no
/// file made beside the store, and the tests cannot reach the records (the
/// root is the server's). A store is live while its directory is in
/// `stores/`: a deletion writes nothing here (its directory leaves), and
/// lines of stores gone are dropped when the journal is rewritten, at start
/// and whenever it has grown to several times what is live, in lines or in
/// bytes (one store's changes each write its whole record).
final class RecordJournal: Sendable {
    let path: String
    private struct State {
        var fd: Int32 = -1
        var lines = 0
        /// Lines at the last rewrite: the next one comes at three times as many.
        var kept = 0
        var bytes = 0
        /// Bytes at the last rewrite: the next one comes at three times as many too.
        var keptBytes = 0
        var rewriting = false
        /// An append failed part way (a full disk): the next one ends that line first.
        var torn = false
    }
    private let state = Mutex(State())

    /// Rewritten no sooner than at this many lines, or bytes.
    static let minimumLines = 4096
    static let minimumBytes = 1 << 20

    /// The journal at `path`, not yet open: `rewrite` starts it.
    init(path: String) { self.path = path }

    deinit { state.withLock { s in if s.fd >= 0 { close(s.fd) } } }

    /// What a journal holds: the last record of each id, and whether it is
    /// already as a rewrite would leave it (one record a line, every line
    /// whole: `lines` records and a line end at the end).
    struct Contents {
        var records: [String: StoreRecord] = [:]
        var lines = 0
        var whole = true
    }

    /// The journal at `path`; a line that is not a record (torn by a crash
    /// mid-write) is skipped. Lines are parsed on every core.
    static func read(_ path: String) -> Contents {
        guard let bytes = try? FileSystem.readFile(path), !bytes.isEmpty else { return Contents() }
        // Lines cut into one piece per core, each ending after a newline.
        let pieces = max(1, min(ProcessInfo.processInfo.activeProcessorCount, bytes.count / (1 << 20)))
        var cuts = [0]
        for piece in 1..<pieces {
            var at = max(bytes.count * piece / pieces, cuts.last!)
            while at < bytes.count && bytes[at - 1] != UInt8(ascii: "\n") { at += 1 }
            cuts.append(at)
        }
        cuts.append(bytes.count)
        let bounds = cuts
        let found = Mutex([(records: [StoreRecord], lines: Int)](repeating: ([], 0), count: pieces))
        DispatchQueue.concurrentPerform(iterations: pieces) { piece in
            var records: [StoreRecord] = [], lines = 0
            var start = bounds[piece]
            let end = bounds[piece + 1]
            while start < end {
                let stop = bytes[start..<end].firstIndex(of: UInt8(ascii: "\n")) ?? end
                lines += 1
                if let json = try? JSONValue.parse(Array(bytes[start..<stop])), let record = StoreRecord(json: json) {
                    records.append(record)
                }
                start = stop + 1
            }
            found.withLock { $0[piece] = (records, lines) }
        }
        // Piece after piece, line after line: the last record of an id wins.
        var contents = Contents()
        let parts = found.withLock { $0 }
        contents.records.reserveCapacity(parts.reduce(0) { $0 + $1.records.count })
        for record in parts.map(\.records).joined() { contents.records[record.id] = record }
        contents.lines = parts.reduce(0) { $0 + $1.lines }
        contents.whole = bytes.last == UInt8(ascii: "\n") && parts.reduce(0) { $0 + $1.records.count } == contents.lines
        return contents
    }

    /// Goes on appending to the journal as it is (already as a rewrite
    /// would leave it, with `lines` lines).
    func resume(lines: Int) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystem.Failure("cannot open", path) }
        let bytes = Int(FileSystem.size(path))
        state.withLock { s in
            if s.fd >= 0 { close(s.fd) }
            (s.fd, s.lines, s.kept, s.bytes, s.keptBytes) = (fd, lines, lines, bytes, bytes)
        }
    }

    /// Appends `record` as one line, then runs `entered` (which makes the
    /// store live) before a rewrite can start: a rewrite sees the store and
    /// its line both, or neither. Answers whether a rewrite is due (the
    /// journal has grown to three times its last one); the caller runs it.
    func append(_ record: StoreRecord, then entered: () throws -> Void = {}) throws -> Bool {
        var line = record.serialized()
        line.append(UInt8(ascii: "\n"))
        return try state.withLock { s -> Bool in
            // One write on an O_APPEND descriptor: lines never interleave.
            if s.torn { line.insert(UInt8(ascii: "\n"), at: 0) }
            do {
                try line.withUnsafeBytes { try FileSystem.writeAll(s.fd, $0, path: path) }
            } catch {
                s.torn = true
                throw error
            }
            s.torn = false
            s.lines += 1
            s.bytes += line.count
            try entered()
            let grown = (s.lines >= RecordJournal.minimumLines && s.lines >= 3 * s.kept)
                || (s.bytes >= RecordJournal.minimumBytes && s.bytes >= 3 * s.keptBytes)
            guard !s.rewriting, grown else { return false }
            s.rewriting = true
            return true
        }
    }

    /// Writes the journal anew with `records()`, the live stores' records,
    /// read while appends wait.
    func rewrite(_ records: () -> [StoreRecord]) throws {
        try state.withLock { s in
            defer { s.rewriting = false }
            let all = records()
            let (fd, bytes) = try RecordJournal.write(all, to: path)
            if s.fd >= 0 { close(s.fd) }
            s.fd = fd
            s.lines = all.count
            s.kept = all.count
            (s.bytes, s.keptBytes) = (bytes, bytes)
        }
    }

    /// Writes `records` to a new file beside `path`, renames it over `path`
    /// and answers a descriptor appending to it, and its size.
    private static func write(_ records: [StoreRecord], to path: String) throws -> (Int32, Int) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(records.count * 512)
        for record in records {
            bytes += record.serialized()
            bytes.append(UInt8(ascii: "\n"))
        }
        // The server's alone (0600): ids are what lets a test reach a store.
        try FileSystem.writeAtomically(bytes, to: path, mode: 0o600)
        let appending = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard appending >= 0 else { throw FileSystem.Failure("cannot open", path) }
        return (appending, bytes.count)
    }
}
