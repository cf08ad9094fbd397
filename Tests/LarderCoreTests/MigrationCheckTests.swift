import Foundation
import LarderCore
import TestSupport
import XCTest

final class MigrationCheckTests: XCTestCase {
    func run(_ fixtures: String) throws -> [String: MigrationCheck.Result] {
        let scratch = Scratch()
        let check = MigrationCheck(catalog: Catalog(directory: fixtures), temporaryDirectory: scratch.path)
        return Dictionary(try check.run().map { ($0.snapshot, $0) }, uniquingKeysWith: { a, _ in a })
    }

    func testTheSampleFixturesPass() throws {
        let results = try run(sampleFixtures)
        XCTAssertEqual(results.count, 4)
        for r in results.values { XCTAssertTrue(r.passed, "\(r.template)/\(r.snapshot): \(r.failures)") }
        XCTAssertEqual(results["v2"]?.fromVersion, "2")
        XCTAssertEqual(results["v2"]?.toVersion, "6")
    }

    func testEachKindOfFailureIsCaughtAndNamed() throws {
        let before = try Data(contentsOf: URL(fileURLWithPath: brokenFixtures + "/shop/snapshots/good.sqlite"))
        let r = try run(brokenFixtures)
        XCTAssertTrue(r["good"]!.passed, "\(r["good"]!.failures)")
        XCTAssertTrue(r["preexisting"]!.passed, "old foreign key violations are not new ones: \(r["preexisting"]!.failures)")
        func has(_ name: String, _ text: String) {
            XCTAssertTrue(r[name]!.failures.contains { $0.contains(text) }, "\(name): \(r[name]!.failures)")
        }
        has("corrupt", "integrity_check before migrating")
        has("fkbreak", "new foreign key violation")
        has("fkbreak", "0003_orders.sql")
        has("gap", "applied version(s) 7")
        has("drift", "column customers.email is not in a fresh build")
        has("expect", "expected version 2, found 1")
        has("expect", "expected 5 rows in customers, found 2")
        has("expect", "expected at least 10 rows in orders, found 2")
        has("expect", "assert is false")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: brokenFixtures + "/shop/snapshots/good.sqlite")), before)
        let xml = MigrationCheck.junit(Array(r.values))
        XCTAssertTrue(xml.contains("<testsuite name=\"larder.migrations\" tests=\"7\" failures=\"5\""), xml)
        XCTAssertEqual(xml.components(separatedBy: "<testcase").count - 1, 7)
    }

    func testSchemaComparisonNamesTableAndColumn() {
        let a: JSONValue = ["tables": [["name": "t", "columns": [["name": "c", "type": "TEXT", "notnull": false, "default": nil, "pk": 0]], "indexes": [], "foreign_keys": []]], "views": [], "triggers": []]
        let b: JSONValue = ["tables": [["name": "t", "columns": [["name": "c", "type": "INTEGER", "notnull": false, "default": nil, "pk": 0]], "indexes": [], "foreign_keys": []]], "views": [], "triggers": []]
        XCTAssertEqual(SchemaComparison.differences(expected: a, found: b), ["column t.c: type is \"INTEGER\", a fresh build has \"TEXT\""])
    }
}
