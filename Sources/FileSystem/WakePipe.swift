// SPDX-License-Identifier: Apache-2.0
import Platform

/// A pipe that cuts a poll(2) short from another thread: the waiting thread
/// polls `descriptor` for `POLLIN` beside what it watches, and `drain()`s it
/// after; `wake()` (from any thread) makes the poll return. Both ends are
/// non-blocking, so a burst of wakes never blocks the waker.
public final class WakePipe: @unchecked Sendable {
    /// The end to poll for `POLLIN`.
    public let descriptor: Int32
    private let writeEnd: Int32

    public init?() {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        descriptor = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        close(descriptor)
        close(writeEnd)
    }

    /// Makes the current or the next poll on `descriptor` return.
    public func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Reads every pending wake.
    public func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while read(descriptor, &bytes, bytes.count) > 0 {}
    }
}
