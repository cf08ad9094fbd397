// SPDX-License-Identifier: Apache-2.0
import Platform

/// The wall clock to the nanosecond, and UTC's calendar (as the Go tools
/// write their times).
public enum SystemClock {
    /// Now, as seconds and nanoseconds since the epoch.
    public static func now() -> (seconds: Int, nanoseconds: Int) {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return (t.tv_sec, t.tv_nsec)
    }

    /// The UTC date and time of `seconds` since the epoch.
    public static func utc(_ seconds: Int) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        var seconds = seconds, parts = tm()
        gmtime_r(&seconds, &parts)
        return (Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}
