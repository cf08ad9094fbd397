// SPDX-License-Identifier: Apache-2.0
import FileSystem

/// `--max-stores` and `--max-disk-bytes`. Everything a store costs counts
/// against the disk quota: its live file and WAL, its base when that is a
/// copy of its own (uploads, forks, a template entry evicted since), ready
/// copies, copies under way (counted before they are made), builds under
/// way and deleted stores whose files are not gone yet.
extension StoreRegistry {
    /// Bytes counted against the quota now.
    public var usedBytes: Int64 { ledger.used }

    /// Whether `bytes` more fit in the quota (always, without one).
    func hasRoom(for bytes: Int64) -> Bool { ledger.hasRoom(for: bytes) }

    private func quotaExceeded(_ used: Int64, wanted: Int64) -> LarderError {
        LarderError(.quotaExceeded, "the disk quota (\(limits.maxDiskBytes) bytes) is reached: \(used) bytes are in use and this store needs about \(wanted) more; "
                        + "delete stores or raise --max-disk-bytes",
                    details: [("limit_bytes", .int(limits.maxDiskBytes)), ("used_bytes", .int(used)), ("wanted_bytes", .int(wanted))])
    }

    /// Counts a store about to be made, and the `bytes` its copy will take,
    /// against `--max-stores` and the disk quota (`quota_exceeded` past
    /// them, ready copies having given their room back first); given back
    /// with `ledger.release`.
    func reserveSlot(bytes: Int64) throws -> DiskLedger.Reservation {
        for attempt in 0..<2 {
            switch ledger.reserve(bytes, liveStores: count) {
            case .success(let reservation):
                return reservation
            case .failure(.slots):
                throw LarderError(.quotaExceeded, "the store limit (\(limits.maxStores)) is reached; delete stores or raise --max-stores",
                                  details: [("limit", .int(Int64(limits.maxStores)))])
            case .failure(.bytes(let used)):
                guard attempt == 0, ledger[.ready] > 0 else { throw quotaExceeded(used, wanted: bytes) }
                pressure.relieve()
            }
        }
        throw quotaExceeded(usedBytes, wanted: bytes)
    }

    /// Checks what a store made aside took (`bytes`) against the quota,
    /// in place of what was reserved for it.
    func admit(_ bytes: Int64, in reservation: DiskLedger.Reservation) throws {
        guard limits.maxDiskBytes > 0 else { return }
        let used = usedBytes - reservation.bytes
        if used + bytes > limits.maxDiskBytes { throw quotaExceeded(used, wanted: bytes) }
    }

    /// Checks that the store's live file may become `bytes` long (a copy
    /// checked in) within the quota.
    func admitReplacement(of store: Store, by bytes: Int64) throws {
        guard limits.maxDiskBytes > 0 else { return }
        let used = usedBytes, live = FileSystem.size(store.databasePath) + FileSystem.size(store.databasePath + "-wal")
        if used - live + bytes > limits.maxDiskBytes { throw quotaExceeded(used, wanted: bytes - live) }
    }

    /// `error`, after asking ready copies for their room when it says the
    /// file system is full (so that room freed is not taken back by them).
    func relieving(_ error: Error) -> Error {
        if DiskPressure.isOutOfRoom(error) { pressure.relieve() }
        return error
    }
}
