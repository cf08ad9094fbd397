@testable import LarderCore
import TestSupport
import XCTest

final class TimestampTests: XCTestCase {
    func testRFC3339InUTCWithMilliseconds() {
        XCTAssertEqual(Timestamp(seconds: 0).rfc3339, "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(Timestamp(seconds: 1_700_000_000.5).rfc3339, "2023-11-14T22:13:20.500Z")
        XCTAssertEqual(Timestamp(seconds: 951_782_400.042).rfc3339, "2000-02-29T00:00:00.042Z")
        XCTAssertTrue(Timestamp(seconds: 1) < Timestamp(seconds: 1).adding(seconds: 1))
        XCTAssertEqual(Timestamp(seconds: 253_402_300_800).rfc3339, "10000-01-01T00:00:00.000Z")
        // Every date to the second as Foundation's formatter writes it, leap days and centuries included.
        let formatter = ISO8601DateFormatter()
        for _ in 0..<2_000 {
            let seconds = Double(Int64.random(in: 0...253_402_300_799))
            XCTAssertEqual(Timestamp(seconds: seconds).rfc3339, formatter.string(from: Date(timeIntervalSince1970: seconds)).dropLast() + ".000Z")
        }
    }
}
