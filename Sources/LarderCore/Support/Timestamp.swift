// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// Wall-clock time as seconds since 1970, formatted as RFC 3339 UTC.
public struct Timestamp: Sendable, Comparable, Hashable {
    public var seconds: Double

    public init(seconds: Double) { self.seconds = seconds }

    public static var now: Timestamp { Timestamp(seconds: Date().timeIntervalSince1970) }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.seconds < b.seconds }

    /// Whole milliseconds since 1970 (Prisma's times on SQLite).
    public var milliseconds: Int64 { Int64((seconds * 1000).rounded(.down)) }

    public func adding(seconds s: Int) -> Timestamp { Timestamp(seconds: seconds + Double(s)) }

    /// `2026-11-21T22:41:07.123Z`
    public var rfc3339: String {
        var out: [UInt8] = []
        writeRFC3339(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `rfc3339`, written at the end of `out` (an answer writes two per store).
    public func writeRFC3339(to out: inout [UInt8]) {
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
        // Digits straight into the 24 bytes (a log line and an answer each carry one).
        // (A year past 9999 has as many digits as it needs.)
        let start: Int, fourDigits = (0...9999).contains(year)
        if fourDigits {
            start = out.count
            out += "0000-00-00T00:00:00.000Z".utf8
        } else {
            out += String(year).utf8
            start = out.count - 4
            out += "-00-00T00:00:00.000Z".utf8
        }
        func put(_ value: Int64, at end: Int, _ width: Int) {
            var v = value
            for i in stride(from: start + end, to: start + end - width, by: -1) {
                out[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            }
        }
        if fourDigits { put(year, at: 3, 4) }
        put(month, at: 6, 2)
        put(day, at: 9, 2)
        put(secondOfDay / 3600, at: 12, 2)
        put(secondOfDay / 60 % 60, at: 15, 2)
        put(secondOfDay % 60, at: 18, 2)
        put(Int64(millis), at: 22, 3)
    }
}
