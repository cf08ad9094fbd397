import Foundation
import LarderCore
import SQLite
import XCTest

/// The repository's root, found from this file.
let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

let sampleFixtures = repositoryRoot + "/fixtures"
let brokenFixtures = repositoryRoot + "/Tests/fixtures/broken"

/// A temporary directory removed after the test.
final class Scratch {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "larder-tests-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes files (relative path → text) and answers the directory.
    @discardableResult
    func write(_ files: [String: String], under folder: String = "") -> String {
        let base = folder.isEmpty ? path : path + "/" + folder
        for (name, text) in files {
            let full = base + "/" + name
            try! FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try! text.write(toFile: full, atomically: true, encoding: .utf8)
        }
        return base
    }

    func database(_ name: String = "db.sqlite") throws -> Connection {
        try Connection(path: path + "/" + name)
    }
}

func rows(_ db: Connection, _ sql: String) throws -> [[String]] {
    try db.rows(sql).map { $0.map { $0.string ?? "NULL" } }
}

func XCTAssertLarderError<T>(_ code: LarderError.Code, _ expression: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line,
                             _ check: (LarderError) -> Void = { _ in }) {
    XCTAssertThrowsError(try expression(), file: file, line: line) { error in
        guard let e = error as? LarderError else { return XCTFail("not a LarderError: \(error)", file: file, line: line) }
        XCTAssertEqual(e.code, code, e.message, file: file, line: line)
        check(e)
    }
}

extension LarderError {
    func detail(_ key: String) -> JSONValue? { details.first { $0.0 == key }?.1 }
}
