import CMicroHTTPD
import Foundation

/// A response body made by a producer on another thread while the server
/// sends it. The buffer is bounded: `write` blocks while it is full, so a slow
/// client slows the producer instead of growing memory. When the client goes
/// away, `write` throws `BodyStream.Cancelled`.
public final class BodyStream: @unchecked Sendable {
    public struct Cancelled: Error {}

    private let condition = NSCondition()
    private var chunks: [[UInt8]] = []
    private var headOffset = 0
    private var buffered = 0
    private let capacity: Int
    private var finished = false
    private var failed = false
    private var cancelled = false
    /// The connection suspended while waiting for bytes, if any.
    private var waiting: OpaquePointer?

    public init(capacity: Int = 1 << 20) {
        self.capacity = capacity
    }

    /// Appends bytes, blocking while the buffer is full.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > 0 else { return }
        condition.lock()
        defer { condition.unlock() }
        while buffered >= capacity && !cancelled { condition.wait() }
        if cancelled { throw Cancelled() }
        chunks.append(Array(bytes))
        buffered += bytes.count
        wakeConsumer()
    }

    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// The body is complete.
    public func finish() {
        condition.lock()
        finished = true
        wakeConsumer()
        condition.unlock()
    }

    /// The producer failed: the client sees the connection closed early,
    /// never a body that looks complete.
    public func fail() {
        condition.lock()
        failed = true
        wakeConsumer()
        condition.unlock()
    }

    public var isCancelled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled
    }

    /// Called when the response is freed (sent or the client left), or when the
    /// server stops.
    func cancel() {
        condition.lock()
        cancelled = true
        failed = failed || !finished
        wakeConsumer()
        condition.broadcast()
        condition.unlock()
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
        condition.lock()
        defer { condition.unlock() }
        if buffered == 0 {
            if failed { return -2 }
            if finished { return -1 }
            waiting = connection
            MHD_suspend_connection(connection)
            return 0
        }
        var copied = 0
        while copied < max, !chunks.isEmpty {
            let chunk = chunks[0]
            let n = min(max - copied, chunk.count - headOffset)
            chunk.withUnsafeBytes { src in
                (buffer + copied).withMemoryRebound(to: UInt8.self, capacity: n) { dst in
                    dst.update(from: src.baseAddress!.assumingMemoryBound(to: UInt8.self) + headOffset, count: n)
                }
            }
            copied += n
            headOffset += n
            if headOffset == chunk.count {
                chunks.removeFirst()
                headOffset = 0
            }
        }
        buffered -= copied
        condition.broadcast()
        return copied
    }
}
