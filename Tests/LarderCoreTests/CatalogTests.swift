import Foundation
import LarderCore
import TestSupport
import XCTest

final class CatalogTests: XCTestCase {
    func testSeesNewTemplatesAndEditsWithoutARestart() throws {
        let scratch = Scratch()
        let fixtures = scratch.path + "/fixtures"
        let catalog = Catalog(directory: fixtures)
        XCTAssertEqual(catalog.names(), [], "no fixtures directory yet")
        scratch.write(["one/migrations/0001_a.sql": "CREATE TABLE a (x);"], under: "fixtures")
        XCTAssertEqual(catalog.names(), ["one"])
        XCTAssertEqual(try catalog.template("one").migrations.versions, ["1"])
        scratch.write(["one/migrations/0002_b.sql": "CREATE TABLE b (y);", "two/migrations/1_a.up.sql": "SELECT 1;",
                       "two/migrations/1_a.down.sql": "SELECT 1;"], under: "fixtures")
        XCTAssertEqual(try catalog.template("one").migrations.versions, ["1", "2"])
        XCTAssertEqual(catalog.names(), ["one", "two"])
        XCTAssertEqual(try catalog.template("two").migrations.format, .golangMigrate)
        scratch.write(["one/data/people.json": "{\"a\": [{\"x\": 1}]}"], under: "fixtures")
        XCTAssertEqual(try catalog.template("one").fixtureNames, ["people"], "a new data/ folder is seen")
        try FileManager.default.removeItem(atPath: fixtures + "/two")
        XCTAssertEqual(catalog.names(), ["one"])
    }

    /// A tool that keeps a folder per migration (Diesel): an edit of a
    /// file in a migration's folder is seen too.
    func testSeesEditsInsideAMigrationsFolder() throws {
        let scratch = Scratch()
        let catalog = Catalog(directory: scratch.path + "/fixtures")
        scratch.write(["d/migrations/2024-01-01-000000_a/up.sql": "CREATE TABLE a (x);"], under: "fixtures")
        let before = try catalog.template("d").migrations.migrations[0].checksum
        scratch.write(["d/migrations/2024-01-01-000000_a/up.sql": "CREATE TABLE a (x, y);"], under: "fixtures")
        XCTAssertNotEqual(try catalog.template("d").migrations.migrations[0].checksum, before)
        XCTAssertEqual(try catalog.template("d").migrations.migrations[0].up, "CREATE TABLE a (x, y);")
    }
}
