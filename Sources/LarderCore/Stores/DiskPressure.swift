// SPDX-License-Identifier: Apache-2.0
import FileSystem
import Synchronization

/// What a full file system (or quota) asks of the stores' parts: ready
/// copies give their room back, idle connections close (SQLite removes a
/// store's `-wal` and `-shm`, 32 KiB or more, with its last one), then the
/// trash is hurried (for a bounded time), and the request that met the full
/// disk tries again.
/// Until the file system has room for every file that kept connections
/// can hold, stores keep no idle connection: a read then costs no disk it
/// does not give back.
final class DiskPressure: Sendable {
    /// Where the room is measured.
    let directory: String
    private let steps = Mutex<(@Sendable () -> Void)?>(nil)
    private let keeping = Atomic<Bool>(true)

    /// What the most kept connections can hold: a `-shm` each (a WAL is checkpointed away at close).
    static let roomForKept = Int64(Store.maxOpenReaders) * 32 * 1024

    init(directory: String) { self.directory = directory }

    /// What gives room back, in order (set once, by the registry that owns every giver).
    func relief(_ steps: @escaping @Sendable () -> Void) { self.steps.withLock { $0 = steps } }

    /// Whether stores may keep idle read connections now.
    var keepsConnections: Bool { keeping.load(ordering: .relaxed) }

    func relieve() {
        keeping.store(false, ordering: .relaxed)
        steps.withLock { $0 }?()
        review()
    }

    /// Keeps connections again once there is room for what they hold.
    func review() {
        guard !keepsConnections, let free = FileSystem.availableBytes(directory), free >= DiskPressure.roomForKept else { return }
        keeping.store(true, ordering: .relaxed)
    }

    /// Whether `error` says the file system is full.
    static func isOutOfRoom(_ error: Error) -> Bool {
        LarderError.classify(error)?.code == .insufficientStorage
    }
}
