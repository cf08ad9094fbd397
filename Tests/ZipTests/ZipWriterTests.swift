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
        let zip = ZipWriter(level: 1) { bytes in out.write(Data(bytes)) }
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
}
