import Dispatch
import Foundation
@testable import LarderServer
import Synchronization
import XCTest

/// The workers `.later` work runs on: a thread each up to a bound, one line
/// (a store's) at most `perLine` at once, the rest waiting in it.
final class WorkersTests: XCTestCase {
    /// Jobs that hold their thread until released, counting how many run at once.
    final class Gate: Sendable {
        let running = Mutex((now: 0, most: 0, done: 0))
        let release = DispatchSemaphore(value: 0)

        func job() -> @Sendable () -> Void {
            { [self] in
                running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                release.wait()
                running.withLock { $0.now -= 1; $0.done += 1 }
            }
        }

        func waitUntil(_ condition: @escaping ((now: Int, most: Int, done: Int)) -> Bool) {
            let deadline = Date().addingTimeInterval(10)
            while !running.withLock({ condition($0) }) && Date() < deadline { usleep(1000) }
        }
    }

    func testOneLineRunsAtMostPerLineAndOthersPassIt() {
        let workers = Workers(maxThreads: 64, perLine: 4)
        let gate = Gate()
        for _ in 0..<12 { workers.submit(line: "store a", gate.job()) }
        gate.waitUntil { $0.now == 4 }
        usleep(50_000)
        XCTAssertEqual(gate.running.withLock { $0.most }, 4, "the rest wait in the line")
        // Another line's work runs at once, past it.
        let other = DispatchSemaphore(value: 0)
        workers.submit(line: "store b") { other.signal() }
        XCTAssertEqual(other.wait(timeout: .now() + 2), .success)
        workers.submit(line: nil) { other.signal() }
        XCTAssertEqual(other.wait(timeout: .now() + 2), .success)
        for _ in 0..<12 { gate.release.signal() }
        gate.waitUntil { $0.done == 12 }
        XCTAssertEqual(gate.running.withLock { $0.done }, 12, "the line drains")
        XCTAssertEqual(gate.running.withLock { $0.most }, 4)
    }

    func testThreadsAreBounded() {
        let workers = Workers(maxThreads: 3, perLine: 4)
        let gate = Gate()
        for i in 0..<8 { workers.submit(line: "store \(i)", gate.job()) }
        gate.waitUntil { $0.now == 3 }
        usleep(50_000)
        XCTAssertEqual(gate.running.withLock { $0.most }, 3)
        for _ in 0..<8 { gate.release.signal() }
        gate.waitUntil { $0.done == 8 }
        XCTAssertEqual(gate.running.withLock { $0.done }, 8, "queued work runs as threads free up")
    }

    func testSlowWorkDoesNotDelayQuickWork() {
        let workers = Workers()
        let gate = Gate()
        for i in 0..<16 { workers.submit(line: "store \(i)", gate.job()) }
        gate.waitUntil { $0.now == 16 }
        let quick = DispatchSemaphore(value: 0)
        workers.submit(line: "store quick") { quick.signal() }
        XCTAssertEqual(quick.wait(timeout: .now() + 2), .success, "it runs while all sixteen hold their threads")
        for _ in 0..<16 { gate.release.signal() }
        gate.waitUntil { $0.done == 16 }
    }
}
