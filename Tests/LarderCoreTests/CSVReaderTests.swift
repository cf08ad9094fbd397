@testable import LarderCore
import TestSupport
import XCTest

final class CSVReaderTests: XCTestCase {
    func records(_ text: String) throws -> [[String?]] { try CSVReader.records(Array(text.utf8)) }

    func testQuotedAndUnquotedEmptyFields() throws {
        // Unquoted empty is NULL (nil), quoted empty is the empty string.
        XCTAssertEqual(try records("a,b,c\n,\"\",x\n"), [["a", "b", "c"], [nil, "", "x"]])
        // Line breaks inside quotes are kept as written (RFC 4180).
        XCTAssertEqual(try records("a\r\n\"multi\r\nline\"\r\n"), [["a"], ["multi\r\nline"]])
        XCTAssertEqual(try records("a,b\n\"say \"\"hi\"\"\",2"), [["a", "b"], ["say \"hi\"", "2"]])
    }

    func testBadQuotingIsAnErrorWithItsLine() {
        XCTAssertThrowsError(try records("a\nab\"c\n")) { XCTAssertTrue("\($0)".contains("line 2"), "\($0)") }
        XCTAssertThrowsError(try records("a\n\"open\n")) { XCTAssertTrue("\($0)".contains("unterminated"), "\($0)") }
    }
}
