import Foundation
import LarderClient
import LarderXCTest
import SQLite
import TestSupport
import XCTest

final class LarderValueTests: XCTestCase {
    func testJSONRoundTrip() throws {
        let text = #"{"a":[1,2.5,-3,true,null,"x\"\n\u0001"],"b":{"c":9007199254740993},"d":1e300}"#
        let value = try JSONDecoder().decode(LarderValue.self, from: Data(text.utf8))
        XCTAssertEqual(value["a"]?[0], .int(1))
        XCTAssertEqual(value["a"]?[1], .double(2.5))
        XCTAssertEqual(value["a"]?[3], .bool(true))
        XCTAssertEqual(value["a"]?[4], .null)
        XCTAssertEqual(value["a"]?[5]?.stringValue, "x\"\n\u{1}")
        // Integers beyond 2^53 stay exact.
        XCTAssertEqual(value["b"]?["c"], .int(9_007_199_254_740_993))
        XCTAssertEqual(value["d"]?.doubleValue, 1e300)
        let again = try JSONDecoder().decode(LarderValue.self, from: Data(value.description.utf8))
        XCTAssertEqual(again, value)
        let encoded = try JSONDecoder().decode(LarderValue.self, from: JSONEncoder().encode(value))
        XCTAssertEqual(encoded, value)
        XCTAssertEqual(LarderValue.blob(Data([1, 2, 3])).dataValue, Data([1, 2, 3]))
        XCTAssertEqual(LarderValue([true, 1, 2.5, "s", nil] as [Any?]), [true, 1, 2.5, "s", nil])
        XCTAssertThrowsError(try JSONEncoder().encode(LarderValue.double(.nan)))
    }
}
