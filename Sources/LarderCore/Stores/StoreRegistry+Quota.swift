// SPDX-License-Identifier: Apache-2.0
import FileSystem

/// `--max-stores` and `--max-disk-bytes`. Everything a store costs counts
/// against the disk quota: its live file and WAL, its base when that is a
/// copy of its own (uploads, forks, a template entry evicted since), ready
/// copies, copies under way (counted before they are made), builds under
/// way and deleted stores whose files are not gone yet.
extension StoreRegistry {
    /// A slot and bytes held for a store being made, until `releaseSlot`.
    struct Reservation {
        let bytes: Int64
    }

    /// Bytes counted against the quota now.
    public var usedBytes: Int64 {
        live.withLock { $0.diskBytes + $0.readyBytes + $0.reservedBytes } + usageOutsideTheLedger
    }

    /// What counts but is not kept in `live`: the trash, and what the
    /// `countAgainstQuota` closures answer (builds under way). Read outside
    /// `live`'s lock (the closures take locks of their own).
    private var usageOutsideTheLedger: Int64 {
        otherUsage.withLock { $0 }.reduce(trash.pendingBytes) { $0 + $1() }
    }

    /// Counts what `usage` answers against the quota (builds under way).
    func countAgainstQuota(_ usage: @escaping @Sendable () -> Int64) {
        otherUsage.withLock { $0.append(usage) }
    }

    /// Calls `handler` when a store needs room that the quota or the file
    /// system does not have (ready copies give theirs back).
    func onDiskPressure(_ handler: @escaping @Sendable () -> Void) { pressure.onPressure(handler) }

    func relieveDiskPressure() { pressure.relieve() }

    /// Whether `bytes` more fit in the quota (always, without one).
    func hasRoom(for bytes: Int64) -> Bool {
        limits.maxDiskBytes <= 0 || usedBytes + bytes <= limits.maxDiskBytes
    }

    private func quotaExceeded(_ used: Int64, wanted: Int64) -> LarderError {
        LarderError(.quotaExceeded, "the disk quota (\(limits.maxDiskBytes) bytes) is reached: \(used) bytes are in use and this store needs about \(wanted) more; "
                        + "delete stores or raise --max-disk-bytes",
                    details: [("limit_bytes", .int(limits.maxDiskBytes)), ("used_bytes", .int(used)), ("wanted_bytes", .int(wanted))])
    }

    /// Counts a store about to be made, and the `bytes` its copy will take,
    /// against `--max-stores` and the disk quota (`quota_exceeded` past
    /// them, ready copies having given their room back first).
    func reserveSlot(bytes: Int64) throws -> Reservation {
        for attempt in 0..<2 {
            // Without a quota nothing is counted (a store's hand-out stays a rename).
            let others = limits.maxDiskBytes > 0 ? usageOutsideTheLedger : 0
            let outcome = try live.withLock { l -> Int64? in
                guard l.stores.count + l.reserved < limits.maxStores else {
                    throw LarderError(.quotaExceeded, "the store limit (\(limits.maxStores)) is reached; delete stores or raise --max-stores",
                                      details: [("limit", .int(Int64(limits.maxStores)))])
                }
                let used = l.diskBytes + l.readyBytes + l.reservedBytes + others
                if limits.maxDiskBytes > 0 && (used + bytes > limits.maxDiskBytes || used >= limits.maxDiskBytes) { return used }
                l.reserved += 1
                l.reservedBytes += bytes
                return nil
            }
            guard let used = outcome else { return Reservation(bytes: bytes) }
            guard attempt == 0, live.withLock({ $0.readyBytes }) > 0 else { throw quotaExceeded(used, wanted: bytes) }
            relieveDiskPressure()
        }
        throw quotaExceeded(usedBytes, wanted: bytes)
    }

    func releaseSlot(_ reservation: Reservation) {
        live.withLock {
            $0.reserved -= 1
            $0.reservedBytes -= reservation.bytes
        }
    }

    /// Checks what a store made aside took (`bytes`) against the quota,
    /// in place of what was reserved for it.
    func admit(_ bytes: Int64, in reservation: Reservation) throws {
        guard limits.maxDiskBytes > 0 else { return }
        let used = usedBytes - reservation.bytes
        if used + bytes > limits.maxDiskBytes { throw quotaExceeded(used, wanted: bytes) }
    }

    /// `error`, after asking ready copies for their room when it says the
    /// file system is full (so that room freed is not taken back by them).
    func relieving(_ error: Error) -> Error {
        if DiskPressure.isOutOfRoom(error) { relieveDiskPressure() }
        return error
    }
}
