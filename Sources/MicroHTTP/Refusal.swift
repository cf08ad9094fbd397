// SPDX-License-Identifier: Apache-2.0
import FileSystem

/// A request the HTTP layer answers on its own, before any handler sees it.
/// The application turns each into its own error body.
public enum Refusal: Sendable {
    /// The body is (or says it is) over the limit: 413.
    case payloadTooLarge(declared: Int?, limit: Int)
    /// The length is ambiguous (two `Content-Length`, or one beside
    /// `Transfer-Encoding`), which a proxy in front might read otherwise: 400.
    case ambiguousLength(String)
    /// The body could not be spooled to disk: 507 when the disk is full, else 500.
    case bodyNotKept(FileSystem.Failure)
    /// The server is stopping: 503.
    case shuttingDown
    /// The peer is a process of a user the server does not serve (`nil`:
    /// its user could not be told): 403.
    case otherUser(uid: UInt32?)
}
