// SPDX-License-Identifier: Apache-2.0
import Dispatch

/// Work done in the background one piece at a time, which a stop can wait
/// for (what goes to the buckets: the fleet's publishes, kept stores' artifacts).
public final class BackgroundLine: Sendable {
    private let queue: DispatchQueue
    private let underWay = DispatchGroup()

    public init(label: String) {
        queue = DispatchQueue(label: label, qos: .utility)
    }

    public func submit(_ work: @escaping @Sendable () -> Void) {
        underWay.enter()
        queue.async { [underWay] in
            defer { underWay.leave() }
            work()
        }
    }

    /// Waits for the work submitted so far, at most `timeout`.
    public func drain(timeout: Duration) {
        _ = underWay.wait(timeout: .now() + timeout.dispatch)
    }
}
