// SPDX-License-Identifier: Apache-2.0
import CSQLite
import CSQLiteHooks
import Synchronization

/// SQLite's temporary files (a sort's runs, temporary tables, statement
/// journals), which a client's query or a check's SQL can grow without end:
/// what they hold in all, and who grants them more (a budget), a MiB at a
/// time. A write past what is granted fails as a full disk would
/// (`SQLITE_FULL`), and `takeRefusal` tells it from one.
public enum TemporaryFiles {
    /// Bytes granted to temporary files now (a MiB for each begun).
    public static var bytes: Int64 { larder_sqlite_temp_bytes() }

    /// Whether this thread's last temporary write was refused by the
    /// budget; forgets it.
    public static func takeRefusal() -> Bool { larder_sqlite_take_temp_refusal() != 0 }

    /// Who grants temporary files `bytes` more (true: granted); nil grants
    /// any. One for the process: the last given holds.
    public static func budget(_ allow: (@Sendable (Int64) -> Bool)?) {
        _ = Connection.opensGuarded // (the system calls are SQLite's only once installed)
        granter.withLock { $0 = allow }
        larder_sqlite_set_temp_allow(allow == nil ? nil : askGranter)
    }

    private static let granter = Mutex<(@Sendable (Int64) -> Bool)?>(nil)

    private static let askGranter: @convention(c) (Int64) -> Int32 = { bytes in
        guard let allow = granter.withLock({ $0 }) else { return 1 }
        return allow(bytes) ? 1 : 0
    }
}
