// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import Synchronization

/// Removes expired stores in the background, every `intervalSeconds`, and
/// recounts what the stores take on disk (a base whose template cache entry
/// was evicted costs its bytes from then on).
public final class Reaper: Sendable {
    let registry: StoreRegistry
    let intervalSeconds: Int
    /// Told the ids of the stores each pass removed, when there were any.
    let reaped: @Sendable ([String]) -> Void
    private let condition = Condition()
    /// Measuring every store is a stat pass over all of them: it gives way
    /// to the requests (`YieldingQueue`).
    private let measuring = YieldingQueue(name: "larder-measure")
    private let stopped = Mutex(false)

    public init(registry: StoreRegistry, intervalSeconds: Int, reaped: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.registry = registry
        self.intervalSeconds = intervalSeconds
        self.reaped = reaped
    }

    public func start() {
        Threads.start("larder-reaper") { [self] in
            // What a restart without a disk quota left unmeasured.
            if registry.diskUsageUnmeasured { measure() }
            while true {
                condition.lock()
                if !stopped.withLock({ $0 }) { condition.wait(seconds: Double(intervalSeconds)) }
                condition.unlock()
                if stopped.withLock({ $0 }) { return }
                let removed = registry.reapExpired()
                if !removed.isEmpty { reaped(removed) }
                measure()
                registry.pressure.review()
            }
        }
    }

    private func measure() {
        let registry = self.registry
        measuring.sync { registry.refreshDiskUsage() }
    }

    public func stop() {
        condition.lock()
        stopped.withLock { $0 = true }
        condition.signal()
        condition.unlock()
    }
}
