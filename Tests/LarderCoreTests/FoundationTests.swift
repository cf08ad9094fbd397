import Foundation
import XCTest

/// The server and its command line import FoundationEssentials, never all
/// of Foundation: that links FoundationInternationalization and ICU's data,
/// 37 MB of the static binary's 61.6 (the package test checks the binary
/// itself). The client libraries, for apps' tests, keep Foundation's URLSession.
final class FoundationTests: XCTestCase {
    func testServerModulesImportFoundationEssentialsOnly() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let clients: Set<String> = ["LarderClient", "LarderXCTest"]
        let files = try XCTUnwrap(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") && !clients.contains(String($0.prefix { $0 != "/" })) }
        XCTAssertGreaterThan(files.count, 100)
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.contains(" import ") {
                let module = line.split(separator: " ").last.map(String.init) ?? ""
                XCTAssertFalse(["Foundation", "FoundationNetworking", "FoundationXML", "FoundationInternationalization"].contains(module),
                               "Sources/\(file): \(line) (use FoundationEssentials, FileSystem's Threads or Text)")
            }
        }
    }
}
