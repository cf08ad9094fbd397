import Foundation
@testable import LarderClient
import TestSupport
import XCTest

/// What a check-in and a check-out stand on.
final class ChecksumTests: XCTestCase {
    func testSHA256() {
        func hex(_ pieces: [Data]) -> String {
            var sum = SHA256()
            for piece in pieces { sum.update(piece) }
            return sum.hex()
        }
        XCTAssertEqual(hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(hex([Data("abc".utf8)]), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let long = Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        XCTAssertEqual(hex([long]), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // A million a's, fed in pieces that straddle the 64-byte blocks.
        let million = Data(repeating: UInt8(ascii: "a"), count: 1_000_000)
        var pieces: [Data] = []
        var at = 0
        for size in [1, 63, 65, 127, 1000, 4096] + Array(repeating: 99_999, count: 10) where at < million.count {
            pieces.append(million.subdata(in: at..<min(at + size, million.count)))
            at += size
        }
        if at < million.count { pieces.append(million.subdata(in: at..<million.count)) }
        XCTAssertEqual(hex(pieces), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testCRC32AndAStoredZipThatZipfileReads() throws {
        var crc = CRC32()
        crc.update(Data("123456789".utf8))
        XCTAssertEqual(crc.value, 0xcbf4_3926)
        let scratch = Scratch()
        let zip = URL(fileURLWithPath: scratch.path + "/two.zip")
        try StoredZip.archive([.init(name: "store.sqlite", data: Data("database".utf8), modified: Date()),
                               .init(name: "store.sqlite-wal", data: Data(repeating: 7, count: 5000), modified: Date())]).write(to: zip)
        XCTAssertEqual(try ZipReader.names(zip), ["store.sqlite", "store.sqlite-wal"]) // testzip() checks every CRC
    }
}
