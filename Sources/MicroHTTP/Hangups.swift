import CMicroHTTPD
import Glibc
import Synchronization

/// The suspended requests whose client leaving should end them (long polls).
/// libmicrohttpd does not watch a suspended connection's socket, so it would
/// notice a client gone only when the answer is written, up to a long poll's
/// whole timeout later. One poll(2) on their sockets (`POLLRDHUP`: the peer
/// closed or shut down its side) finds them at once; a pipe wakes it when one
/// is added.
final class Hangups: @unchecked Sendable {
    private let watched = Mutex<[ObjectIdentifier: RequestContext]>([:])
    private let wakePipe: (read: Int32, write: Int32)
    /// Linux's POLLRDHUP (Glibc declares it only under _GNU_SOURCE).
    private static let peerClosed = Int16(0x2000)

    init() {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
        }
        wakePipe = (fds[0], fds[1])
    }

    deinit {
        close(wakePipe.read)
        close(wakePipe.write)
    }

    var count: Int { watched.withLock { $0.count } }

    func watch(_ context: RequestContext) {
        watched.withLock { $0[ObjectIdentifier(context)] = context }
        var byte: UInt8 = 1
        _ = write(wakePipe.write, &byte, 1)
    }

    /// Stops watching (the request was answered): before its connection can
    /// close and its descriptor be reused.
    func forget(_ context: RequestContext) {
        watched.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(context)) }
    }

    /// Waits up to `milliseconds`; answers the watched requests whose client
    /// has gone, no longer watched.
    func wait(milliseconds: Int32) -> [RequestContext] {
        let contexts = watched.withLock { Array($0.values) }
        var fds = [pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0)]
        for context in contexts {
            fds.append(pollfd(fd: larder_mhd_connection_fd(context.connection), events: Hangups.peerClosed, revents: 0))
        }
        guard poll(&fds, nfds_t(fds.count), milliseconds) > 0 else { return [] }
        var byte = [UInt8](repeating: 0, count: 64)
        while read(wakePipe.read, &byte, byte.count) > 0 {}
        // (POLLNVAL too: a descriptor that is no longer open would wake every poll at once.)
        let gone = Int16(POLLHUP | POLLERR | POLLNVAL) | Hangups.peerClosed
        let hungUp = zip(contexts, fds.dropFirst()).filter { $0.1.revents & gone != 0 }.map(\.0)
        // Only those still watched: an answered one may have closed, and its
        // descriptor number gone to a new connection, since the snapshot.
        return watched.withLock { w in hungUp.filter { w.removeValue(forKey: ObjectIdentifier($0)) != nil } }
    }
}
