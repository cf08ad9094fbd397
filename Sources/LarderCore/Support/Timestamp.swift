// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// Wall-clock time as seconds since 1970, formatted as RFC 3339 UTC.
public struct Timestamp: Sendable, Comparable, Hashable {
    public var seconds: Double

    public init(seconds: Double) { self.seconds = seconds }

    public static var now: Timestamp { Timestamp(seconds: Date().timeIntervalSince1970) }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.seconds < b.seconds }

    public func adding(seconds s: Int) -> Timestamp { Timestamp(seconds: seconds + Double(s)) }

    /// `2026-11-21T22:41:07.123Z`
    public var rfc3339: String {
        let whole = Int64(seconds.rounded(.down))
        let millis = Int((seconds - Double(whole)) * 1000)
        var days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let secondOfDay = whole - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))."
            + pad(Int64(millis), 3) + "Z"
    }
}
