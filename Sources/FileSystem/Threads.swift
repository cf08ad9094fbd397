// SPDX-License-Identifier: Apache-2.0
import CSystem
import Platform
import Synchronization

/// Threads, sleeps and a condition variable straight over POSIX: what the
/// server needs of Foundation's `Thread` and `NSCondition`, which live in
/// the part of Foundation that links ICU's data into the binary (docs/performance.md).
public enum Threads {
    /// Runs `body` on a new detached thread, named `name` for `top -H` and
    /// debuggers (the kernel keeps the first 15 bytes).
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Job(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let code = pthread_create(&thread, nil, { context in
            let job = Unmanaged<Job>.fromOpaque(context!).takeRetainedValue()
            Threads.nameThisThread(job.name)
            job.body()
            return nil
        }, box)
        guard code == 0 else {
            Unmanaged<Job>.fromOpaque(box).release()
            fatalError("cannot start thread \(name): \(String(cString: strerror(code)))")
        }
        pthread_detach(thread)
    }

    /// Names the calling thread (prctl); portable: left unnamed, a name
    /// being only for debuggers (Darwin: pthread_setname_np, docs/macos.md).
    static func nameThisThread(_ name: String) {
        if Syscalls.portable { return }
        larder_name_thread(name)
    }

    /// Lowers the calling thread for good to nice 19 and SCHED_IDLE; where
    /// either is refused, it stays as it was. Portable: no such hint for
    /// one thread in POSIX, so none (Darwin: the background QoS class,
    /// docs/macos.md).
    static func yieldToOthersForGood() {
        if Syscalls.portable { return }
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(larder_thread_id()), 19)
        _ = larder_thread_idle()
    }

    /// Sleeps the calling thread for `milliseconds`, however many signals arrive meanwhile.
    public static func sleep(milliseconds: Int) {
        var asked = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        var left = timespec()
        while nanosleep(&asked, &left) != 0 && errno == EINTR { asked = left }
    }

    private final class Job {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }
}

/// A mutex, for what must be locked in one place and unlocked in another
/// (else `Synchronization.Mutex` says it better).
public class Lock: @unchecked Sendable {
    fileprivate let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the lock.
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A lock and a condition variable on it, waited on against the monotonic
/// clock (a change of the wall clock neither cuts nor stretches a wait).
public final class Condition: Lock, @unchecked Sendable {
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public override init() {
        super.init()
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    public func signal() { pthread_cond_signal(condition) }
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (holding the lock) until signalled; may wake spuriously, as every condition wait may.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits (holding the lock) until signalled or `seconds` have passed;
    /// false when the time ran out.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        let seconds = max(seconds, 0)
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = deadline.tv_nsec + Int(seconds.truncatingRemainder(dividingBy: 1) * 1e9)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }
}

/// A flag one thread sets and others look at (a request's client left, say).
public final class Latch: Sendable {
    private let value = Atomic<Bool>(false)
    public init() {}
    public var isSet: Bool { value.load(ordering: .acquiring) }
    public func set() { value.store(true, ordering: .releasing) }
}

/// A serial queue on a thread of its own in SCHED_IDLE (at nice 19 where
/// that is refused), for housekeeping that must go on but should give way
/// at once to the requests (the trash, ready copies made ahead): a request
/// thread that wakes preempts it at once, where at nice 19 alone it could
/// wait out the housekeeping's slice (docs/performance.md). SCHED_IDLE is
/// a very small weight, not a ban: busy cores still leave it some time.
/// A thread of its own,
/// since an unprivileged process may lower a thread's priority but never
/// raise it again: a thread of a shared pool must never be lowered.
public final class YieldingQueue: Sendable {
    private final class Shared: @unchecked Sendable {
        let condition = Condition()
        /// Guarded by `condition`: work and when it is due (monotonic nanoseconds).
        var items: [(due: UInt64, body: @Sendable () -> Void)] = []
        var stopped = false
    }
    private let shared = Shared()

    /// `name`: the thread's, for `top -H` (15 bytes kept).
    public init(name: String) {
        let shared = self.shared
        Threads.start(name) {
            Threads.yieldToOthersForGood()
            shared.condition.lock()
            defer { shared.condition.unlock() }
            while true {
                // The earliest due first; among those due together, the first asked.
                guard let next = shared.items.indices.min(by: { shared.items[$0].due < shared.items[$1].due }) else {
                    if shared.stopped { return }
                    shared.condition.wait()
                    continue
                }
                let now = YieldingQueue.now()
                if shared.items[next].due > now {
                    shared.condition.wait(seconds: Double(shared.items[next].due - now) / 1e9)
                    continue
                }
                let body = shared.items.remove(at: next).body
                shared.condition.unlock()
                body()
                shared.condition.lock()
            }
        }
    }

    /// The thread ends once the work asked before is done.
    deinit {
        shared.condition.withLock {
            shared.stopped = true
            shared.condition.signal()
        }
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Runs `body` on the queue's thread, `milliseconds` from now at the earliest.
    public func async(afterMilliseconds milliseconds: Int = 0, _ body: @escaping @Sendable () -> Void) {
        let due = YieldingQueue.now() + UInt64(max(milliseconds, 0)) * 1_000_000
        shared.condition.withLock {
            shared.items.append((due, body))
            shared.condition.signal()
        }
    }

    /// Runs `body` on the queue's thread after the work already due, and waits for it.
    public func sync(_ body: @escaping @Sendable () -> Void) {
        let done = Condition(), finished = Latch()
        async {
            body()
            done.withLock {
                finished.set()
                done.signal()
            }
        }
        done.withLock { while !finished.isSet { done.wait() } }
    }
}
