// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials

/// Where work that may take long runs (reads, writes and copies of stores,
/// builds, the dashboard): a thread per piece of work, up to `maxThreads`,
/// so that slow work on some stores leaves the CPU to the others (the kernel
/// shares it among threads; a queue as wide as the cores made one suite's
/// sixteen endless queries hold another's `SELECT 1` for 20 s). Work of one
/// lane (a store) runs at most `perLane` at once and the rest waits in that
/// lane's line, holding no thread: twelve diffs waiting on a store a test
/// locked take four threads, not all of them.
final class WorkPool: Sendable {
    typealias Job = @Sendable () -> Void

    let maxThreads: Int
    let perLane: Int
    /// How long an idle thread waits for work before it ends (down to `keptThreads`).
    let idleSeconds: Double
    let keptThreads: Int

    private struct Queued {
        let lane: String?
        let job: Job
    }
    private struct Lane {
        var running = 0
        var waiting: [Queued] = []
    }
    private struct State {
        /// Work that may start, oldest first.
        var ready: [Queued] = []
        var readyHead = 0
        var lanes: [String: Lane] = [:]
        var threads = 0
        var idle = 0
        /// Set by `stop`: idle threads end, kept ones too.
        var stopping = false
    }
    /// Guarded by `condition`, which idle threads wait on.
    nonisolated(unsafe) private var state = State()
    private let condition = Condition()

    init(maxThreads: Int = 64, perLane: Int = 4, idleSeconds: Double = 10, keptThreads: Int = 4) {
        self.maxThreads = max(maxThreads, 1)
        self.perLane = max(perLane, 1)
        self.idleSeconds = idleSeconds
        self.keptThreads = keptThreads
    }

    private func locked<T>(_ body: (inout State) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body(&state)
    }

    /// Ends its threads once the work given to them is done (the server
    /// stops; its process may go on, as a test suite's does).
    func stop() {
        locked { s in
            s.stopping = true
            condition.broadcast()
        }
    }

    /// Runs `job` on a pool thread, in `lane`'s line when it has one.
    func submit(lane: String?, _ job: @escaping Job) {
        let spawn = locked { s -> Bool in
            let queued = Queued(lane: lane, job: job)
            if let lane {
                var line = s.lanes[lane] ?? Lane()
                guard line.running < perLane else {
                    line.waiting.append(queued)
                    s.lanes[lane] = line
                    return false
                }
                line.running += 1
                s.lanes[lane] = line
            }
            return makeReady(queued, &s)
        }
        if spawn { startThread() }
    }

    /// Queues work that may start: an idle thread takes it, else a new one
    /// (answered true: start it) while there is room for one.
    private func makeReady(_ queued: Queued, _ s: inout State) -> Bool {
        s.ready.append(queued)
        condition.signal()
        // Idle threads take what is ready (a woken one counts as idle until
        // it has taken something): a new thread only for work beyond them.
        guard s.ready.count - s.readyHead > s.idle, s.threads < maxThreads else { return false }
        s.threads += 1
        return true
    }

    private func startThread() {
        Threads.start("larder.work") { [self] in work() }
    }

    /// A lane's piece of work ended: the next in its line may start.
    private func finished(_ lane: String, _ s: inout State) -> Bool {
        guard var line = s.lanes[lane] else { return false }
        line.running -= 1
        guard !line.waiting.isEmpty else {
            s.lanes[lane] = line.running == 0 ? nil : line
            return false
        }
        let queued = line.waiting.removeFirst()
        line.running += 1
        s.lanes[lane] = line
        return makeReady(queued, &s)
    }

    private func work() {
        var done: String??
        while true {
            condition.lock()
            var spawn = false
            if let lane = done { spawn = lane.map { finished($0, &state) } ?? false }
            var ended = false
            while state.readyHead >= state.ready.count {
                if state.stopping {
                    state.threads -= 1
                    ended = true
                    break
                }
                state.idle += 1
                let woken = condition.wait(seconds: idleSeconds)
                state.idle -= 1
                if !woken, state.readyHead >= state.ready.count, state.threads > keptThreads {
                    state.threads -= 1
                    ended = true
                    break
                }
            }
            var queued: Queued?
            if !ended {
                queued = state.ready[state.readyHead]
                state.readyHead += 1
                // (What was taken goes, the work's captures with it, once the line is empty.)
                if state.readyHead == state.ready.count {
                    state.ready.removeAll(keepingCapacity: true)
                    state.readyHead = 0
                } else if state.readyHead > 64 && state.readyHead * 2 > state.ready.count {
                    state.ready.removeFirst(state.readyHead)
                    state.readyHead = 0
                }
            }
            condition.unlock()
            if spawn { startThread() }
            guard let queued else { return }
            queued.job()
            done = .some(queued.lane)
        }
    }
}
