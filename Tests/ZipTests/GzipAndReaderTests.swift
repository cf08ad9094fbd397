import Digest
import Foundation
import TestSupport
import XCTest
import Zip

final class GzipAndReaderTests: XCTestCase {
    func bytes(_ count: Int) -> [UInt8] {
        var state: UInt32 = 7
        return (0..<count).map { i in
            state = state &* 1_103_515_245 &+ 12_345
            return i % 3 == 0 ? UInt8(state >> 24) : UInt8(i % 7) // half noise, half pattern
        }
    }

    /// The fleet names an object by the SHA-256 of the plain database, and checks it on the way back.
    func testGzipRoundTripsAndGzipReadsIt() throws {
        let scratch = Scratch()
        let plain = bytes(3 << 20)
        _ = FileManager.default.createFile(atPath: scratch.path + "/db", contents: Data(plain))
        let packed = try Gzip.compress(scratch.path + "/db", to: scratch.path + "/db.gz")
        XCTAssertEqual(packed, Gzip.Plain(sha256: SHA256.hex(plain), size: Int64(plain.count)))
        let unpacked = try Gzip.decompress(scratch.path + "/db.gz", to: scratch.path + "/back", maxBytes: 1 << 30)
        XCTAssertEqual(unpacked, packed)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/back")), Data(plain))
        // The real tool reads it too.
        let gzip = Process()
        gzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
        gzip.arguments = ["-t", scratch.path + "/db.gz"]
        try gzip.run()
        gzip.waitUntilExit()
        XCTAssertEqual(gzip.terminationStatus, 0)
    }

    func testDecompressRefusesWhatIsNotAWholeGzipWithinItsLimit() throws {
        let scratch = Scratch()
        _ = FileManager.default.createFile(atPath: scratch.path + "/db", contents: Data(bytes(1 << 20)))
        _ = try Gzip.compress(scratch.path + "/db", to: scratch.path + "/db.gz")
        let whole = try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/db.gz"))
        _ = FileManager.default.createFile(atPath: scratch.path + "/cut.gz", contents: whole.prefix(whole.count / 2))
        for (file, limit) in [("db", Int64(1) << 30), ("cut.gz", 1 << 30), ("db.gz", 1000)] {
            XCTAssertThrowsError(try Gzip.decompress(scratch.path + "/" + file, to: scratch.path + "/out", maxBytes: limit), file)
            XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.path + "/out"), "nothing is left of a refusal")
        }
    }

    /// `larder open` reads what the writer writes, and what Python's zipfile writes.
    func testTheReaderReadsWhatTheWriterAndPythonWrite() throws {
        let scratch = Scratch()
        let big = bytes(300_000), small = Array("{\"id\": 1}".utf8)
        var out = Data()
        let zip = ZipWriter { out.append(contentsOf: $0) }
        try zip.add(name: "store.sqlite", bytes: big, method: .deflate)
        try zip.add(name: "manifest.json", bytes: small, method: .store)
        try zip.finish()
        _ = FileManager.default.createFile(atPath: scratch.path + "/ours.zip", contents: out)
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("store.sqlite", open(sys.argv[2], "rb").read())
                z.writestr("manifest.json", b'{"id": 1}')
            """, scratch.path + "/python.zip", scratch.path + "/big"]
        _ = FileManager.default.createFile(atPath: scratch.path + "/big", contents: Data(big))
        try python.run()
        python.waitUntilExit()
        for name in ["ours.zip", "python.zip"] {
            let reader = try ZipReader(path: scratch.path + "/" + name)
            XCTAssertEqual(reader.entries.map(\.name), ["store.sqlite", "manifest.json"])
            XCTAssertEqual(try reader.read("manifest.json", maxBytes: 100), small)
            try reader.extract("store.sqlite", to: scratch.path + "/" + name + ".out", maxBytes: 1 << 20)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/" + name + ".out")), Data(big))
            XCTAssertThrowsError(try reader.read("store.sqlite", maxBytes: 1000), "past the limit")
        }
        // A flipped byte in the deflated data fails its CRC (or the inflate), never reads as something else.
        var broken = out
        broken[200] ^= 0xFF
        _ = FileManager.default.createFile(atPath: scratch.path + "/broken.zip", contents: broken)
        XCTAssertThrowsError(try ZipReader(path: scratch.path + "/broken.zip").read("store.sqlite", maxBytes: 1 << 20))
        _ = FileManager.default.createFile(atPath: scratch.path + "/not.zip", contents: Data(small))
        XCTAssertThrowsError(try ZipReader(path: scratch.path + "/not.zip"))
    }
}
