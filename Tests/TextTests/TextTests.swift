import Foundation
import Text
import XCTest

/// Text's helpers answer what Foundation's did where the server used them.
final class TextTests: XCTestCase {
    let samples = ["", " ", "\t x \t", " a b ", "\n\r\n x\r\n", "\u{00A0}x\u{2003}", "\u{85}x\u{2028}", "\u{2029} x",
                   "é\u{301} ", " 😀\u{FE0F} ", "x\u{0B}\u{0C}", "\u{200B}x\u{200B}", "--+goose Up\r", " \u{3000}全角\u{3000} "]

    func testTrimmingMatchesFoundationsCharacterSets() {
        for sample in samples {
            XCTAssertEqual(sample.trimmed(), sample.trimmingCharacters(in: .whitespacesAndNewlines), sample.debugDescription)
            XCTAssertEqual(sample.trimmingSpaces(), sample.trimmingCharacters(in: .whitespaces), sample.debugDescription)
            let sub = Substring(sample)
            XCTAssertEqual(sub.trimmed(), sub.trimmingCharacters(in: .whitespacesAndNewlines), sample.debugDescription)
        }
    }

    /// Every ASCII character and the first Latin-1 ones, at either end, and "x" that needs no trimming.
    func testTrimmingMatchesFoundationForEveryASCIICharacter() {
        for value in UInt32(0)..<0x100 {
            let c = String(Character(Unicode.Scalar(value)!))
            for sample in [c + "x" + c, c, "x", "x" + c + "y"] {
                XCTAssertEqual(sample.trimmed(), sample.trimmingCharacters(in: .whitespacesAndNewlines), "U+\(String(value, radix: 16))")
                XCTAssertEqual(sample.trimmingSpaces(), sample.trimmingCharacters(in: .whitespaces), "U+\(String(value, radix: 16))")
            }
        }
    }

    func testFixedMatchesStringFormat() {
        for value in [0, 0.05, 0.15, 1.25, 2.345, 9.95, 99.999, 1234.5678, -3.14159, 1e12, 0.0004999] {
            for places in [0, 1, 3] {
                XCTAssertEqual(value.fixed(places), String(format: "%.\(places)f", value), "\(value) \(places)")
            }
        }
    }

    func testLocalTimeIsDateFormattersLocalTime() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        let before = formatter.string(from: Date())
        let written = localTime("%Y-%m-%d %H:%M")
        XCTAssertTrue([before, formatter.string(from: Date())].contains(written), written)
    }
}
