// SPDX-License-Identifier: Apache-2.0
import CPeerUser

/// Who owns the other end of a TCP connection from a process of this
/// machine: what lets a server on loopback serve only its own user, since
/// every local user can reach a loopback port.
public enum PeerUser {
    public enum Source: Sendable {
        /// The kernel's sock_diag, then /proc/net/tcp when that cannot say.
        case kernel
        case sockDiag
        case procNet
    }

    /// The uid owning the peer's socket of the connection `descriptor`, or
    /// nil when it cannot be told (not a TCP socket, a peer on another host).
    public static func of(_ descriptor: Int32, source: Source = .kernel) -> UInt32? {
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
