// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// Removes expired stores in the background, every `intervalSeconds`, and
/// recounts what the stores take on disk (a base whose template cache entry
/// was evicted costs its bytes from then on).
public final class Reaper: Sendable {
    let registry: StoreRegistry
    let intervalSeconds: Int
    /// Told the ids of the stores each pass removed, when there were any.
    let reaped: @Sendable ([String]) -> Void
    private let condition = NSCondition()
    private let stopped = Mutex(false)

    public init(registry: StoreRegistry, intervalSeconds: Int, reaped: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.registry = registry
        self.intervalSeconds = intervalSeconds
        self.reaped = reaped
    }

    public func start() {
        let thread = Thread { [self] in
            while true {
                condition.lock()
                if !stopped.withLock({ $0 }) { _ = condition.wait(until: Date().addingTimeInterval(Double(intervalSeconds))) }
                condition.unlock()
                if stopped.withLock({ $0 }) { return }
                let removed = registry.reapExpired()
                if !removed.isEmpty { reaped(removed) }
                registry.refreshDiskUsage()
            }
        }
        thread.name = "larder-reaper"
        thread.start()
    }

    public func stop() {
        condition.lock()
        stopped.withLock { $0 = true }
        condition.signal()
        condition.unlock()
    }
}
