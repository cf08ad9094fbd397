import Glibc

/// Wall-clock time as seconds since 1970, formatted as RFC 3339 UTC.
public struct Timestamp: Sendable, Comparable, Hashable {
    public var seconds: Double

    public init(seconds: Double) { self.seconds = seconds }

    public static var now: Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(seconds: Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9)
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.seconds < b.seconds }

    public func adding(seconds s: Int) -> Timestamp { Timestamp(seconds: seconds + Double(s)) }

    /// `2026-11-21T22:41:07.123Z`
    public var rfc3339: String {
        var t = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        let millis = Int((seconds - seconds.rounded(.down)) * 1000)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        let ms = String(millis)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))."
            + String(repeating: "0", count: 3 - ms.count) + ms + "Z"
    }
}
