// SPDX-License-Identifier: Apache-2.0
import CMicroHTTPD
import FileSystem
import Synchronization

/// The state of one request on one connection, from its first callback to
/// libmicrohttpd's "completed" notice. Reached from the request thread that owns
/// the connection and, for suspended requests, from the thread that answers.
final class ConnectionState: @unchecked Sendable {
    enum Phase { case reading, suspended, answered }

    struct State {
        var phase: Phase = .reading
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var spool: Spool?
        var received = 0
        var tooLarge = false
        var spoolFailure: FileSystem.Failure?
        var pending: Response?
        /// Runs if the client leaves while the request is suspended.
        var onHangup: (@Sendable () -> Void)?
    }

    let connection: OpaquePointer
    unowned let server: Server
    let state = Mutex(State())

    init(connection: OpaquePointer, server: Server) {
        self.connection = connection
        self.server = server
    }

    var isAnswered: Bool { state.withLock { $0.phase == .answered || $0.pending != nil } }

    /// Takes the answer of a resumed request.
    func takePending() -> Response? {
        state.withLock { s in
            guard let response = s.pending else { return nil }
            s.pending = nil
            s.phase = .answered
            return response
        }
    }

    /// The client left while the request was suspended: its hangup handler
    /// runs, then the connection is resumed (with 499, nginx's "client closed
    /// request", for the log) so that libmicrohttpd closes it.
    func clientLeft() {
        let handler = state.withLock { s in
            defer { s.onHangup = nil }
            return s.onHangup
        }
        handler?()
        complete(with: Response(status: 499))
    }

    /// Called by a `Responder` on any thread: stores the answer and resumes
    /// the connection, whose next callback queues it. The hangup handler
    /// goes: it holds what the wait held, often the responder itself.
    func complete(with response: Response) {
        server.hangups.forget(self)
        let resume: Bool = state.withLock { s in
            s.onHangup = nil
            guard s.phase == .suspended, s.pending == nil else { return false }
            s.pending = response
            return true
        }
        if resume { MHD_resume_connection(connection) }
    }
}

/// One client connection, from accept to close: for the deadline on its
/// first request's headers.
final class ConnectionRecord: @unchecked Sendable {
    let descriptor: Int32
    let started: UInt64
    /// Under the server's `live` lock.
    var sentHeaders = false
    /// Why every request of the connection is refused (a peer whose user
    /// may not connect); set before the record is shared.
    var refusal: Refusal?

    init(descriptor: Int32, started: UInt64) {
        self.descriptor = descriptor
        self.started = started
    }
}

/// Binds a streaming body to the connection it is sent on, for the content
/// reader callbacks.
final class StreamBinding {
    let stream: BodyStream
    let connection: OpaquePointer
    unowned let server: Server

    init(stream: BodyStream, connection: OpaquePointer, server: Server) {
        self.stream = stream
        self.connection = connection
        self.server = server
    }
}
