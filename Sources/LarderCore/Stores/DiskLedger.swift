// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite
import Synchronization

/// Every byte that counts against `--max-disk-bytes`, and every store slot
/// that counts against `--max-stores`, in one place. The parts that move a
/// store's files (`StoreLifecycle`, `Trash`, operations on a store) tell it
/// what they moved; what no part can count (a builder's own writes, SQLite's
/// temporary files, the journal) it measures where it lies.
final class DiskLedger: Sendable {
    /// Where counted bytes are.
    enum Account: Sendable {
        /// Live stores: each one's `diskCost`.
        case stores
        /// Ready copies, shelved or on their way to a shelf.
        case ready
        /// Copies under way, counted before they are made.
        case reserved
        /// Deleted stores whose files are not gone yet.
        case trash
    }

    private struct Counts {
        var stores: Int64 = 0
        var ready: Int64 = 0
        var reserved: Int64 = 0
        var trash: Int64 = 0
        /// Slots held by stores being made.
        var reservedSlots = 0
        /// Whether `stores` counts the stores found at start (see `StoreLifecycle.recover`).
        var measured = true

        subscript(account: Account) -> Int64 {
            get {
                switch account {
                case .stores: stores
                case .ready: ready
                case .reserved: reserved
                case .trash: trash
                }
            }
            set {
                switch account {
                case .stores: stores = max(0, newValue)
                case .ready: ready = newValue
                case .reserved: reserved = newValue
                case .trash: trash = newValue
                }
            }
        }

        var total: Int64 { stores + ready + reserved + trash }
    }

    private let counts = Mutex(Counts())
    let maxDiskBytes: Int64
    let maxStores: Int
    /// Measured, not counted: what app builders write, and the journal.
    private let builds: String, journal: String

    init(limits: StoreLimits, layout: RootLayout) {
        maxDiskBytes = limits.maxDiskBytes
        maxStores = limits.maxStores
        builds = layout.builds
        journal = layout.journal
    }

    var limited: Bool { maxDiskBytes > 0 }

    subscript(account: Account) -> Int64 { counts.withLock { $0[account] } }

    /// Adds `bytes` (negative: takes them) to `account`.
    func add(_ bytes: Int64, to account: Account) {
        guard bytes != 0 else { return }
        counts.withLock { $0[account] += bytes }
    }

    /// Moves `bytes` from one account to another at once (a ready copy handed out, a store deleted).
    func move(_ bytes: Int64, from: Account, to: Account) {
        counts.withLock { c in
            c[from] -= bytes
            c[to] += bytes
        }
    }

    /// Every byte counted against the quota now.
    var used: Int64 { counts.withLock { $0.total } + measured }

    /// What is measured where it lies, outside the lock (it lists `builds/`).
    private var measured: Int64 {
        guard limited else { return 0 }
        let builds = FileSystem.entries(self.builds).map { self.builds + "/" + $0 + "/" + RootLayout.buildDatabaseName }
        return builds.reduce(TemporaryFiles.bytes + FileSystem.size(journal)) { $0 + FileSystem.size($1) + FileSystem.size($1 + "-wal") }
    }

    /// Whether `bytes` more fit in the quota (always, without one).
    func hasRoom(for bytes: Int64) -> Bool { !limited || used + bytes <= maxDiskBytes }

    /// A slot and `bytes` held for a store being made, until `release`.
    struct Reservation {
        let bytes: Int64
    }

    enum Refusal: Error {
        case slots
        case bytes(used: Int64)
    }

    /// Holds a slot (of `liveStores` taken) and `bytes`, or says which limit refuses them.
    func reserve(_ bytes: Int64, liveStores: Int) -> Result<Reservation, Refusal> {
        // Without a quota nothing is counted (a store's hand-out stays a rename).
        let others = limited ? measured : 0
        return counts.withLock { c in
            guard liveStores + c.reservedSlots < maxStores else { return .failure(.slots) }
            let used = c.total + others
            if limited && (used + bytes > maxDiskBytes || used >= maxDiskBytes) { return .failure(.bytes(used: used)) }
            c.reservedSlots += 1
            c.reserved += bytes
            return .success(Reservation(bytes: bytes))
        }
    }

    func release(_ reservation: Reservation) {
        counts.withLock { c in
            c.reservedSlots -= 1
            c.reserved -= reservation.bytes
        }
    }

    /// Sets the live stores' bytes to a fresh measure of them; `measured`
    /// false: the stores found at start, yet to be measured by the reaper.
    func setStores(_ bytes: Int64, measured: Bool = true) {
        counts.withLock { c in
            c.stores = bytes
            c.measured = measured
        }
    }

    var storesUnmeasured: Bool { !counts.withLock { $0.measured } }
}
