// SPDX-License-Identifier: Apache-2.0
/// One SQLite value, as stored.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var int64: Int64? {
        switch self {
        case .integer(let v): return v
        case .real(let d): return Int64(exactly: d)
        case .text(let s): return Int64(s)
        default: return nil
        }
    }

    public var string: String? {
        switch self {
        case .text(let s): return s
        case .integer(let v): return String(v)
        case .real(let d): return String(d)
        default: return nil
        }
    }

    /// SQLite's notion of truth for a single value (non-zero numbers).
    public var isTrue: Bool {
        switch self {
        case .integer(let v): return v != 0
        case .real(let d): return d != 0
        case .text(let s): return (Double(s) ?? 0) != 0
        case .blob, .null: return false
        }
    }
}
