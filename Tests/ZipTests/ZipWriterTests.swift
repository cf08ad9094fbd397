import Digest
import Foundation
import TestSupport
import XCTest
import Zip

final class ZipWriterTests: XCTestCase {
    /// An entry over 4 GiB needs Zip64 records; zeros deflate to a few MB, so
    /// the archive is small enough to write and read back in a test.
    func testEntriesOver4GiBUseZip64AndReadBack() throws {
        // 4 GiB of deflate takes 16 s to over a minute on 2 cores: the
        // benchmark and nightly jobs set LARDER_ZIP64_TEST=1; every run checks
        // the same writer on small archives below.
        try XCTSkipUnless(ProcessInfo.processInfo.environment["LARDER_ZIP64_TEST"] == "1", "set LARDER_ZIP64_TEST=1 to write a 4 GiB entry")
        let scratch = Scratch()
        let path = scratch.path + "/big.zip"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        let zip = ZipWriter { bytes in out.write(Data(bytes)) }
        let size: UInt64 = (1 << 32) + 5 * (1 << 20)
        var remaining = size
        try zip.add(name: "store.sqlite", size: size, crc: nil, method: .deflate) { buffer in
            let n = Int(min(UInt64(buffer.count), remaining))
            buffer.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: n)
            remaining -= UInt64(n)
            return n
        }
        try zip.add(name: "manifest.json", bytes: Array("{}".utf8), method: .store)
        try zip.finish()
        try out.close()
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", """
            import sys, zipfile
            z = zipfile.ZipFile(sys.argv[1])
            print(z.getinfo("store.sqlite").file_size, z.read("manifest.json").decode())
            """, path]
        let pipe = Pipe()
        python.standardOutput = pipe
        try python.run()
        python.waitUntilExit()
        let answer = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(python.terminationStatus, 0)
        XCTAssertEqual(answer.trimmingCharacters(in: .whitespacesAndNewlines), "\(size) {}")
    }

    func testSmallArchivesReadBackWithPython() throws {
        let scratch = Scratch()
        let path = scratch.path + "/small.zip"
        var bytes: [UInt8] = []
        let zip = ZipWriter { bytes.append(contentsOf: $0) }
        let text = Array(String(repeating: "larder ", count: 10_000).utf8)
        try zip.add(name: "a.txt", bytes: text, method: .deflate)
        try zip.add(name: "b.txt", bytes: text, method: .store)
        try zip.finish()
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; assert z.read('a.txt') == z.read('b.txt') == b'larder ' * 10000", path]
        try python.run()
        python.waitUntilExit()
        XCTAssertEqual(python.terminationStatus, 0)
    }

    /// Each entry's name, method, size and SHA-256, as Python's zipfile reads them back from `bytes`.
    private func readBack(_ bytes: [UInt8]) throws -> String {
        let scratch = Scratch()
        let path = scratch.path + "/read.zip"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try readZip(path, """
            for i in z.infolist():
                print(i.filename, i.compress_type, i.file_size, hashlib.sha256(z.read(i)).hexdigest())
            """)
    }

    /// Bytes that deflate differently from piece to piece: random (stored
    /// blocks), zeros (long runs), and text (matches), 7.5 MiB and a bit.
    private func mixedBytes() -> [UInt8] {
        let random = FileHandle(forReadingAtPath: "/dev/urandom")!
        defer { try? random.close() }
        var bytes = [UInt8](random.readData(ofLength: 3 << 20))
        bytes += [UInt8](repeating: 0, count: 2 << 20)
        bytes += Array(String(repeating: "INSERT INTO artworks VALUES (17, 'Untitled', 1969);\n", count: 50_000).utf8)
        bytes += [UInt8](random.readData(ofLength: 12_345))
        return bytes
    }

    /// An entry over one batch is deflated in pieces on every core and
    /// joined into one stream: written in uneven calls across batches and a
    /// short last piece, it reads back whole with zlib's inflate.
    func testAParallelDeflatedEntryReadsBackWhole() throws {
        let data = mixedBytes()
        XCTAssertGreaterThan(data.count, ZipWriter.batchSize + 2 * (1 << 20))
        var out: [UInt8] = []
        let zip = ZipWriter { out.append(contentsOf: $0) }
        try zip.beginEntry(name: "store.sqlite", size: UInt64(data.count), crc: nil, method: .deflate)
        var at = 0
        for step in [1, 5 << 20, 100_000, 3 << 20] where at < data.count {
            let end = min(at + step, data.count)
            try zip.writeEntry(Array(data[at..<end]))
            at = end
        }
        try zip.writeEntry(Array(data[at...]))
        try zip.endEntry()
        try zip.add(name: "manifest.json", bytes: Array("{}".utf8), method: .deflate)
        try zip.finish()
        XCTAssertLessThan(out.count, data.count, "zeros and text compress")
        XCTAssertEqual(try readBack(out), """
            store.sqlite 8 \(data.count) \(SHA256.hex(data))
            manifest.json 8 2 \(SHA256.hex(Array("{}".utf8)))

            """)
    }

    /// An entry of one batch or less is one stream, fed in small writes that
    /// fill the output buffer many times over.
    func testASerialDeflatedEntryReadsBackWhole() throws {
        let data = Array(mixedBytes().suffix(ZipWriter.batchSize))
        var out: [UInt8] = []
        let zip = ZipWriter { out.append(contentsOf: $0) }
        try zip.beginEntry(name: "small.sqlite", size: UInt64(data.count), crc: nil, method: .deflate)
        var at = 0
        while at < data.count {
            let end = min(at + 4_096 + at % 777, data.count)
            try zip.writeEntry(Array(data[at..<end]))
            at = end
        }
        try zip.endEntry()
        try zip.add(name: "empty", bytes: [], method: .deflate)
        try zip.finish()
        XCTAssertEqual(try readBack(out), """
            small.sqlite 8 \(data.count) \(SHA256.hex(data))
            empty 8 0 \(SHA256.hex([]))

            """)
    }
}
