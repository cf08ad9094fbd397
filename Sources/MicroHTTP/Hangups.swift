// SPDX-License-Identifier: Apache-2.0
import CMicroHTTPD
import FileSystem
import Platform
import Synchronization

/// The suspended requests whose client leaving should end them (long polls).
/// libmicrohttpd does not watch a suspended connection's socket, so it would
/// notice a client gone only when the answer is written, up to a long poll's
/// whole timeout later. One poll(2) on their sockets (`POLLRDHUP`: the peer
/// closed or shut down its side) finds them at once; a pipe wakes it when one
/// is added. Portable, without `POLLRDHUP`: `POLLIN`, then a peek that reads
/// the end of the stream (Darwin: kqueue's EV_EOF, docs/macos.md).
final class Hangups: @unchecked Sendable {
    private let watched = Mutex<[ObjectIdentifier: ConnectionState]>([:])
    /// Portable: the watched whose client sent more (a pipelined request):
    /// readable for good, they would wake every poll, so they are left to
    /// libmicrohttpd, which notices a client gone when it answers.
    private let talking = Mutex<Set<ObjectIdentifier>>([])
    /// Chosen once: a poll never mixes the two ways.
    private let portable = Syscalls.portable
    /// Wakes the poll when a request is added (without it, the next poll
    /// after at most a second takes the new one in).
    private let wakePipe = WakePipe()
    /// Linux's POLLRDHUP (Glibc declares it only under _GNU_SOURCE).
    private static let peerClosed = Int16(0x2000)

    var count: Int { watched.withLock { $0.count } }

    func watch(_ context: ConnectionState) {
        watched.withLock { $0[ObjectIdentifier(context)] = context }
        wakePipe?.wake()
    }

    /// Stops watching (the request was answered): before its connection can
    /// close and its descriptor be reused.
    func forget(_ context: ConnectionState) {
        watched.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(context)) }
        if portable { talking.withLock { _ = $0.remove(ObjectIdentifier(context)) } }
    }

    /// Waits up to `milliseconds`; answers the watched requests whose client
    /// has gone, no longer watched.
    func wait(milliseconds: Int32) -> [ConnectionState] {
        let quiet = portable ? talking.withLock { t in watched.withLock { $0.filter { !t.contains($0.key) } } } : nil
        let contexts = Array((quiet ?? watched.withLock { $0 }).values)
        // The wake pipe last (-1, ignored by poll, when there is none).
        let events = portable ? Int16(POLLIN) : Hangups.peerClosed
        var fds = contexts.map { pollfd(fd: larder_mhd_connection_fd($0.connection), events: events, revents: 0) }
        fds.append(pollfd(fd: wakePipe?.descriptor ?? -1, events: Int16(POLLIN), revents: 0))
        guard poll(&fds, nfds_t(fds.count), milliseconds) > 0 else { return [] }
        wakePipe?.drain()
        // (POLLNVAL too: a descriptor that is no longer open would wake every poll at once.)
        let gone = Int16(POLLHUP | POLLERR | POLLNVAL) | (portable ? 0 : Hangups.peerClosed)
        let hungUp = zip(contexts, fds).filter { context, fd in
            if fd.revents & gone != 0 { return true }
            return portable && fd.revents & Int16(POLLIN) != 0 && endOfStream(fd.fd, context)
        }.map(\.0)
        // Only those still watched: an answered one may have closed, and its
        // descriptor number gone to a new connection, since the snapshot.
        return watched.withLock { w in hungUp.filter { w.removeValue(forKey: ObjectIdentifier($0)) != nil } }
    }

    /// Portable: whether the readable socket `fd` reads the end of the
    /// stream (or a reset); one that holds bytes is set aside as talking.
    private func endOfStream(_ fd: Int32, _ context: ConnectionState) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if n == 0 { return true }
        if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR }
        talking.withLock { _ = $0.insert(ObjectIdentifier(context)) }
        return false
    }
}
