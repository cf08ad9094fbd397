// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import Synchronization

/// The stores' records, one JSON line each appended to one file in the root
/// (`stores.journal`), the last line of an id winning: making a store or
/// changing its record is one `write(2)` on a file held open, with no
/// file made beside the store, and the tests cannot reach the records (the
/// root is the server's). A store is live while its directory is in
/// `stores/`: a deletion writes nothing here (its directory leaves), and
/// lines of stores gone are dropped when the journal is rewritten, at start
/// and whenever it has grown to several times what is live, in lines or in
/// bytes (one store's changes each write its whole record).
///
/// An acknowledged change must survive a power cut: a change's line is
/// synced (`makeDurable`) before its answer, the syncs of changes made at
/// once grouped into one, and a rewrite is on disk before it replaces the file.
final class RecordJournal: Sendable {
    let path: String
    /// Syncs of the appends; off on a root that a power cut empties anyway.
    private let syncs: GroupSync
    private struct State {
        /// Where lines are appended (replaced by a rewrite).
        var file: AppendingFile?
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
    init(path: String, synced: Bool) {
        self.path = path
        syncs = GroupSync(enabled: synced)
    }

    /// What a journal holds: the last record of each id, and whether it is
    /// already as a rewrite would leave it (one record a line, every line
    /// whole: `lines` records and a line end at the end).
    struct Contents {
        var records: [String: StoreRecord] = [:]
        var lines = 0
        var whole = true
    }

    /// The journal at `path`; a line that is not a record (torn by a crash
    /// mid-write) is skipped. Read a piece at a time (memory stays at a
    /// piece and the records, however long the file), each piece's lines
    /// parsed on every core.
    static func read(_ path: String, pieceBytes: Int = 8 << 20) -> Contents {
        guard let file = try? ReadableFile(path: path) else { return Contents() }
        var contents = Contents(), parsed = 0, offset: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: pieceBytes)
        // The end of the last piece that is not yet a whole line.
        var rest: [UInt8] = [], last: UInt8?
        func take(_ lines: ArraySlice<UInt8>) {
            let (records, count) = parse(lines)
            for record in records { contents.records[record.id] = record }
            contents.lines += count
            parsed += records.count
        }
        while true {
            guard let count = try? file.read(into: &buffer, at: offset), count > 0 else { break }
            offset += UInt64(count)
            var bytes = rest
            bytes += buffer[..<count]
            last = bytes.last
            guard let end = bytes.lastIndex(of: UInt8(ascii: "\n")) else {
                rest = bytes
                continue
            }
            rest = Array(bytes[(end + 1)...])
            take(bytes[...end])
        }
        if !rest.isEmpty { take(rest[...]) }
        contents.whole = (last == nil || last == UInt8(ascii: "\n")) && parsed == contents.lines
        return contents
    }

    /// The records of whole lines (each ending with a newline, or at the
    /// end), in their order, and how many lines there were.
    private static func parse(_ bytes: ArraySlice<UInt8>) -> (records: [StoreRecord], lines: Int) {
        // Cut into one part per core, each ending after a newline.
        let parts = max(1, min(ProcessInfo.processInfo.activeProcessorCount, bytes.count / (1 << 20)))
        var cuts = [bytes.startIndex]
        for part in 1..<parts {
            var at = max(bytes.startIndex + bytes.count * part / parts, cuts.last!)
            while at < bytes.endIndex && bytes[at - 1] != UInt8(ascii: "\n") { at += 1 }
            cuts.append(at)
        }
        cuts.append(bytes.endIndex)
        let bounds = cuts
        let found = Mutex([(records: [StoreRecord], lines: Int)](repeating: ([], 0), count: parts))
        DispatchQueue.concurrentPerform(iterations: parts) { part in
            var records: [StoreRecord] = [], lines = 0
            var start = bounds[part]
            let end = bounds[part + 1]
            while start < end {
                let stop = bytes[start..<end].firstIndex(of: UInt8(ascii: "\n")) ?? end
                lines += 1
                if let json = try? JSONValue.parse(Array(bytes[start..<stop])), let record = StoreRecord(json: json) {
                    records.append(record)
                }
                start = stop + 1
            }
            found.withLock { $0[part] = (records, lines) }
        }
        // Part after part, line after line: the caller lets the last record of an id win.
        let all = found.withLock { $0 }
        return (Array(all.map(\.records).joined()), all.reduce(0) { $0 + $1.lines })
    }

    /// Goes on appending to the journal as it is (already as a rewrite
    /// would leave it, with `lines` lines).
    func resume(lines: Int) throws {
        let file = try AppendingFile(path: path)
        let bytes = Int(FileSystem.size(path))
        state.withLock { s in (s.file, s.lines, s.kept, s.bytes, s.keptBytes) = (file, lines, lines, bytes, bytes) }
    }

    /// Appends `record` as one line, then runs `entered` (which makes the
    /// store live) before a rewrite can start: a rewrite sees the store and
    /// its line both, or neither. Answers whether a rewrite is due (the
    /// journal has grown to three times its last one; the caller runs it),
    /// and the line's ticket for `makeDurable`.
    func append(_ record: StoreRecord, then entered: () throws -> Void = {}) throws -> (due: Bool, ticket: UInt64) {
        var line = record.serialized()
        line.append(UInt8(ascii: "\n"))
        let due = try state.withLock { s -> Bool in
            // One write on an O_APPEND descriptor: lines never interleave.
            if s.torn { line.insert(UInt8(ascii: "\n"), at: 0) }
            do {
                guard let file = s.file else { throw FileSystem.Failure.unusableDescriptor("not open for appending", path) }
                try file.append(line)
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
        return (due, syncs.changed())
    }

    /// Returns once the lines appended up to `ticket` are on disk (the
    /// descriptor's data: its size included). A rewrite meanwhile swaps the
    /// descriptor, but the file it leaves is on disk whole.
    func makeDurable(_ ticket: UInt64) throws {
        try syncs.wait(for: ticket) {
            // (Held here, the file stays open should a rewrite replace it meanwhile.)
            try state.withLock { $0.file }?.sync(dataOnly: true)
        }
    }

    /// Writes the journal anew with `records()`, the live stores' records,
    /// read while appends wait.
    func rewrite(_ records: () -> [StoreRecord]) throws {
        try state.withLock { s in
            defer { s.rewriting = false }
            let all = records()
            let (file, bytes) = try RecordJournal.write(all, to: path, synced: syncs.enabled)
            s.file = file
            s.lines = all.count
            s.kept = all.count
            (s.bytes, s.keptBytes) = (bytes, bytes)
        }
    }

    /// Writes `records` to a new file beside `path`, renames it over `path`
    /// and answers a descriptor appending to it, and its size.
    private static func write(_ records: [StoreRecord], to path: String, synced: Bool) throws -> (AppendingFile, Int) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(records.count * 512)
        for record in records {
            bytes += record.serialized()
            bytes.append(UInt8(ascii: "\n"))
        }
        // The server's alone (0600): ids are what lets a test reach a store.
        try FileSystem.writeAtomically(bytes, to: path, mode: 0o600, synced: synced)
        return (try AppendingFile(path: path), bytes.count)
    }
}
