// SPDX-License-Identifier: Apache-2.0
import CMicroHTTPD
import FileSystem
import Platform

/// A response body made by a producer on another thread while the server
/// sends it. The producer never waits for the client: what it writes goes
/// to an unlinked file in the spool directory (a whole file it appends is
/// read from where it is), and the connection reads it
/// from there at the client's own pace, suspended while it has caught up.
/// So the producer's thread is free as soon as the body is made, and a
/// client that stops reading costs a descriptor and some disk, never a
/// thread or memory. When the client goes away, `write` throws
/// `BodyStream.Cancelled` and the file is gone with the descriptor.
public final class BodyStream: @unchecked Sendable {
    public struct Cancelled: Error {}

    private let lock = Lock()
    private let descriptor: Int32
    /// Bytes of the body made so far, and sent so far.
    private var written = 0
    private var sent = 0
    /// Bytes in the spool file.
    private var spooled = 0
    /// Where the body's bytes are, in order: spans of the spool file, and
    /// spans of files the producer appended whole (`append(file:)`), read
    /// from there instead of being copied through the spool.
    private var pieces: [Piece] = []
    private var firstPiece = 0
    /// Descriptors of appended files, closed with the stream.
    private var appended: [Int32] = []

    private struct Piece {
        var start: Int
        var end: Int
        let descriptor: Int32
        /// Where `start` is in that file.
        let offset: Int
    }
    private var finished = false
    private var failed = false
    private var cancelled = false
    /// The connection suspended while waiting for bytes, if any.
    private var waiting: OpaquePointer?
    /// Pacing (see `pace`): the producer's next round, and whether one is under way.
    private var produce: (@Sendable () -> Void)?
    private var producing = true
    private var readAhead = Int.max

    public init(spoolDirectory: String) throws {
        var generator = SystemRandomNumberGenerator()
        let path = spoolDirectory + "/stream-" + String(generator.next() as UInt64, radix: 16)
        descriptor = try FileSystem.createPrivate(path)
        FileSystem.remove(path)
    }

    deinit {
        close(descriptor)
        appended.forEach { close($0) }
    }

    /// Appends bytes; never waits for the client.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > 0 else { return }
        lock.lock()
        let offset = spooled
        let stop = cancelled
        lock.unlock()
        if stop { throw Cancelled() }
        try FileSystem.writeAll(descriptor, bytes, at: offset, path: "a streamed response")
        lock.lock()
        if let last = pieces.last, last.descriptor == descriptor, last.end == written {
            pieces[pieces.count - 1].end += bytes.count
        } else {
            pieces.append(Piece(start: written, end: written + bytes.count, descriptor: descriptor, offset: offset))
        }
        spooled += bytes.count
        written += bytes.count
        wakeConsumer()
        lock.unlock()
    }

    /// Appends `count` bytes of the file open as `file` from `offset`,
    /// sent from there as the client reads (a copy of the descriptor is
    /// kept until the stream ends): a large file goes out without passing
    /// through the spool. The file must not change meanwhile.
    public func append(file: Int32, offset: Int, count: Int) throws {
        guard count > 0 else { return }
        let copy = dup(file)
        guard copy >= 0 else { throw FileSystem.Failure("cannot duplicate the descriptor of", "a streamed file") }
        lock.lock()
        defer { lock.unlock() }
        appended.append(copy)
        if cancelled { throw Cancelled() }
        pieces.append(Piece(start: written, end: written + count, descriptor: copy, offset: offset))
        written += count
        wakeConsumer()
    }

    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// Paces a producer that works in rounds by the client's reading: the
    /// producer runs a round, then asks `wantsMore()` whether to go on; once
    /// it is `readAhead` bytes ahead of the client it stops, holding nothing,
    /// and `produce` is called (from the server's thread: it should only
    /// schedule the round) when the client has read its way closer.
    public func pace(readAhead: Int, _ produce: @escaping @Sendable () -> Void) {
        lock.lock()
        self.readAhead = readAhead
        self.produce = produce
        lock.unlock()
    }

    /// Whether the producer should make more now; false means it stops until called again.
    public func wantsMore() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if !cancelled && !finished && !failed && written - sent < readAhead { return true }
        producing = false
        return false
    }

    /// The body is complete.
    public func finish() {
        lock.lock()
        finished = true
        produce = nil
        wakeConsumer()
        lock.unlock()
    }

    /// The producer failed: the client sees the connection closed early,
    /// never a body that looks complete.
    public func fail() {
        lock.lock()
        failed = true
        produce = nil
        wakeConsumer()
        lock.unlock()
    }

    public var isCancelled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return cancelled
    }

    /// Called when the response is freed (sent or the client left), or when the
    /// server stops.
    func cancel() {
        lock.lock()
        cancelled = true
        failed = failed || !finished
        produce = nil
        wakeConsumer()
        lock.unlock()
    }

    private func wakeConsumer() {
        if let connection = waiting {
            waiting = nil
            MHD_resume_connection(connection)
        }
    }

    /// Copies up to `max` bytes into `buffer`. Returns the count, or suspends
    /// `connection` and returns 0 when nothing is ready yet, or an end marker.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int, connection: OpaquePointer) -> Int {
        lock.lock()
        let available = written - sent
        if available == 0 {
            if failed { lock.unlock(); return -2 }
            if finished { lock.unlock(); return -1 }
            waiting = connection
            MHD_suspend_connection(connection)
            let next = nextRound()
            lock.unlock()
            next?()
            return 0
        }
        while pieces[firstPiece].end <= sent { firstPiece += 1 }
        let piece = pieces[firstPiece]
        let offset = piece.offset + (sent - piece.start)
        lock.unlock()
        let n = pread(piece.descriptor, buffer, min(max, piece.end - sent), off_t(offset))
        guard n > 0 else { return -2 }
        lock.lock()
        sent += n
        let next = nextRound()
        lock.unlock()
        next?()
        return n
    }

    /// The producer's next round, when it has stopped and the client has
    /// read close to the end of what it made. Called with the lock held.
    private func nextRound() -> (@Sendable () -> Void)? {
        guard let produce, !producing, written - sent < readAhead / 2 else { return nil }
        producing = true
        return produce
    }
}
