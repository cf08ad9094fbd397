// SPDX-License-Identifier: Apache-2.0
import CPeerUser
import Platform

/// Who owns the other end of a TCP connection from a process of this
/// machine: what lets a server on loopback serve only its own user, since
/// every local user can reach a loopback port.
public enum PeerUser {
    public enum Source: Sendable {
        /// The kernel's sock_diag, then /proc/net/tcp when that cannot say;
        /// portable: none.
        case kernel
        case sockDiag
        case procNet
    }

    /// Whether this system can tell at all. Only Linux tells who owns a TCP
    /// socket's other end; POSIX (and Darwin, whose LOCAL_PEERCRED is for
    /// Unix sockets) cannot, so with the portable calls there is no check
    /// to offer (docs/macos.md).
    public static var isAvailable: Bool { !Syscalls.portable }

    /// The uid owning the peer's socket of the connection `descriptor`, or
    /// nil when it cannot be told (not a TCP socket, a peer on another host,
    /// a system that cannot tell).
    public static func of(_ descriptor: Int32, source: Source = .kernel) -> UInt32? {
        if source == .kernel, !isAvailable { return nil }
        var ends = larder_tcp_ends()
        guard larder_tcp_ends_of(descriptor, &ends) == 0 else { return nil }
        let uid: Int64
        switch source {
        case .kernel:
            let asked = larder_peer_uid_diag(&ends)
            uid = asked >= 0 ? asked : larder_peer_uid_proc(&ends)
        case .sockDiag: uid = larder_peer_uid_diag(&ends)
        case .procNet: uid = larder_peer_uid_proc(&ends)
        }
        return uid >= 0 ? UInt32(truncatingIfNeeded: uid) : nil
    }
}
