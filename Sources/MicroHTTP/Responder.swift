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

    /// True once the request has been answered (or the server is stopping).
    public var isAnswered: Bool { context.isAnswered }
}
