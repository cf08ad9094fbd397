// SPDX-License-Identifier: Apache-2.0
import Dispatch
import CMicroHTTPD
import Synchronization

/// Finishes a suspended request from any thread. The first `send` wins; later
/// calls are ignored.
public final class Responder: Sendable {
    let context: ConnectionState?
    let sink: (@Sendable (Response) -> Void)?

    init(context: ConnectionState) {
        self.context = context
        sink = nil
    }

    /// A responder without a connection, which hands the answer to `sink`:
    /// for routes run in-process (tests of a router without sockets).
    public init(sink: @escaping @Sendable (Response) -> Void) {
        context = nil
        self.sink = sink
    }

    /// Answers the request and resumes its connection.
    public func send(_ response: Response) {
        if let context { context.complete(with: response) } else { sink?(response) }
    }

    /// Runs `body` (once, on the server's watcher thread) if the client
    /// disconnects before the request is answered; the request is then
    /// dropped and any later `send` ignored. For long waits: release what
    /// the wait holds at once, not when its timeout comes.
    public func onHangup(_ body: @escaping @Sendable () -> Void) {
        guard let context else { return }
        let waiting = context.state.withLock { s -> Bool in
            guard s.phase == .suspended, s.pending == nil else { return false }
            s.onHangup = body
            return true
        }
        if waiting { context.server.hangups.watch(context) }
    }

    /// True once the request has been answered (or the server is stopping).
    public var isAnswered: Bool { context?.isAnswered ?? false }
}

extension Reply {
    /// The answer, with work meant for a worker thread started here (routes
    /// run without a server: tests), waited for up to `seconds`. Nil when
    /// it does not answer by then (a long poll).
    public func answeredHere(waitingUpTo seconds: Double = 30) -> Response? {
        switch self {
        case .now(let response): return response
        case .later(let work):
            let answer = Mutex<Response?>(nil)
            let answered = DispatchSemaphore(value: 0)
            work(Responder(sink: { response in
                answer.withLock { $0 = $0 ?? response }
                answered.signal()
            }))
            _ = answered.wait(timeout: .now() + seconds)
            return answer.withLock { $0 }
        }
    }
}
