import Foundation
import XCTest

/// Larder is Apache-2.0: LICENSE says so, and every source file of the
/// package names it in its first line, as SPDX has it.
final class LicenseTests: XCTestCase {
    let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func testLicenseIsApache2() throws {
        let text = try String(contentsOf: repository.appendingPathComponent("LICENSE"), encoding: .utf8)
        XCTAssertTrue(text.contains("Apache License\n                           Version 2.0, January 2004"))
        let notice = try String(contentsOf: repository.appendingPathComponent("NOTICE"), encoding: .utf8)
        XCTAssertTrue(notice.contains("Licensed under the Apache License, Version 2.0"))
    }

    func testEverySourceFileNamesTheLicense() throws {
        let sources = repository.appendingPathComponent("Sources")
        let files = try XCTUnwrap(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") || $0.hasSuffix(".h") }
        XCTAssertGreaterThan(files.count, 100)
        for file in files {
            let first = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8).prefix { $0 != "\n" }
            XCTAssertTrue(first == "// SPDX-License-Identifier: Apache-2.0" || first == "/* SPDX-License-Identifier: Apache-2.0 */",
                          "Sources/\(file) does not start with the SPDX line")
        }
    }
}
