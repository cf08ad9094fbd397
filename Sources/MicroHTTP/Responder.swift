import CMicroHTTPD
import Synchronization

/// Finishes a suspended request from any thread. The first `send` wins; later
/// calls are ignored.
public final class Responder: Sendable {
    let context: RequestContext

    init(context: RequestContext) { self.context = context }

    /// Answers the request and resumes its connection.
    public func send(_ response: Response) {
        context.complete(with: response)
    }

    /// Runs `body` (once, on the server's watcher thread) if the client
    /// disconnects before the request is answered; the request is then
    /// dropped and any later `send` ignored. For long waits: release what
    /// the wait holds at once, not when its timeout comes.
    public func onHangup(_ body: @escaping @Sendable () -> Void) {
        let waiting = context.state.withLock { s -> Bool in
            guard s.phase == .suspended, s.pending == nil else { return false }
            s.onHangup = body
            return true
        }
        if waiting { context.server.hangups.watch(context) }
    }

    /// True once the request has been answered (or the server is stopping).
    public var isAnswered: Bool { context.isAnswered }
}
