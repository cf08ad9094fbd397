import FileSystem
import Foundation
import LarderCore
import SQLite
import TestSupport
import XCTest

final class CheckInputTests: XCTestCase {
    func testNothingToCheckIsAnErrorNeverASilentPass() throws {
        let scratch = Scratch()
        func run(_ directory: String, template: String? = nil) throws -> [MigrationCheck.Report] {
            try MigrationCheck(catalog: Catalog(directory: directory), temporaryDirectory: scratch.path).run(template: template)
        }
        XCTAssertLarderError(.notFound, try run(scratch.path + "/missing"))
        let empty = scratch.path + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        XCTAssertLarderError(.badRequest, try run(empty)) { XCTAssertTrue($0.message.contains("no template"), $0.message) }
        let noSnapshots = scratch.write(["notes/migrations/001_init.sql": "CREATE TABLE n (id INTEGER PRIMARY KEY);"], under: "plain")
        XCTAssertLarderError(.badRequest, try run(noSnapshots)) { XCTAssertTrue($0.message.contains("snapshots"), $0.message) }
        XCTAssertLarderError(.badRequest, try run(noSnapshots, template: "notes")) { XCTAssertTrue($0.message.contains("'notes'"), $0.message) }
        XCTAssertLarderError(.unknownTemplate, try run(sampleFixtures, template: "nosuch"))
    }
}
