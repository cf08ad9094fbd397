// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials

/// The workers: where work that may take long runs (reads, writes and
/// copies of stores, builds, the dashboard), off the request threads. A
/// thread per piece of work, up to `maxThreads`, so slow work on some
/// stores leaves the CPU to the others; work of one line (a store, a build)
/// runs at most `perLine` at once and the rest waits, holding no thread.
final class Workers: Sendable {
    typealias Job = @Sendable () -> Void

    let maxThreads: Int
    let perLine: Int
    /// How long an idle thread waits for work before it ends (down to `keptThreads`).
    let idleSeconds: Double
    let keptThreads: Int

    private struct Queued {
        let line: String?
        let job: Job
    }
    private struct Line {
        var running = 0
        var waiting: [Queued] = []
    }
    private struct State {
        /// Work that may start, oldest first.
        var ready: [Queued] = []
        var readyHead = 0
        var lines: [String: Line] = [:]
        var threads = 0
        var idle = 0
        /// Set by `stop`: idle threads end, kept ones too.
        var stopping = false
    }
    /// Guarded by `condition`, which idle threads wait on.
    nonisolated(unsafe) private var state = State()
    private let condition = Condition()

    init(maxThreads: Int = 64, perLine: Int = 4, idleSeconds: Double = 10, keptThreads: Int = 4) {
        self.maxThreads = max(maxThreads, 1)
        self.perLine = max(perLine, 1)
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

    /// Runs `job` on a worker thread, after the work of its `line` ahead of it.
    func submit(line: String?, _ job: @escaping Job) {
        let spawn = locked { s -> Bool in
            let queued = Queued(line: line, job: job)
            if let line {
                var queue = s.lines[line] ?? Line()
                guard queue.running < perLine else {
                    queue.waiting.append(queued)
                    s.lines[line] = queue
                    return false
                }
                queue.running += 1
                s.lines[line] = queue
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

    /// A line's piece of work ended: the next in its line may start.
    private func finished(_ line: String, _ s: inout State) -> Bool {
        guard var queue = s.lines[line] else { return false }
        queue.running -= 1
        guard !queue.waiting.isEmpty else {
            s.lines[line] = queue.running == 0 ? nil : queue
            return false
        }
        let queued = queue.waiting.removeFirst()
        queue.running += 1
        s.lines[line] = queue
        return makeReady(queued, &s)
    }

    private func work() {
        var done: String??
        while true {
            condition.lock()
            var spawn = false
            if let line = done { spawn = line.map { finished($0, &state) } ?? false }
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
            done = .some(queued.line)
        }
    }
}
