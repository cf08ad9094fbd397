import Foundation
import LarderClient
import LarderXCTest
import SQLite
import XCTest

/// The example of clients/swift/README.md: each test gets its own store of
/// the gallery template with two fixtures; after a pass it is deleted, after
/// a failure kept, with its artifact saved (and attached, on Apple platforms).
final class GalleryExampleTests: LarderTestCase {
    override class var template: String? { "gallery" }
    override class var fixtures: [String] { ["artists", "artworks"] }
    // Only here: this package's tests bring their own server. An app's tests
    // leave this out; the client comes from LARDER_URL and LARDER_TOKEN.
    override class var client: LarderClient { ClientTestServer.client }

    func testStartsWithTheFixtures() async throws {
        let counts = try await store.counts()
        XCTAssertEqual(counts["artists"], 4)
        XCTAssertEqual(counts["artworks"], 12)
        XCTAssertEqual(store.info.label, LarderLabel.label(run: LarderLabel.run(), package: "LarderClientTests.GalleryExampleTests",
                                                           test: "testStartsWithTheFixtures"))
    }

    func testAppWritesAndTheTestWaits() async throws {
        // The code under test opens the store's file with its own SQLite stack.
        let path = store.path
        Task.detached {
            try await Task.sleep(for: .milliseconds(200))
            let db = try Connection(path: path)
            try db.run("INSERT INTO albums (title) VALUES ('Summer')")
        }
        let counts = try await store.wait("albums>=1", timeout: .seconds(5))
        XCTAssertEqual(counts["albums"], 1)
        let albums = try await store.query("SELECT title FROM albums")
        XCTAssertEqual(albums.rows, [["Summer"]])
    }

    func testEachTestHasItsOwnStore() async throws {
        // Whatever another test wrote is not here.
        let before = try await store.counts(tables: ["albums"])
        XCTAssertEqual(before, ["albums": 0])
        try await store.load(rows: ["albums": [["title": "Mine"]]])
        let after = try await store.counts(tables: ["albums"])
        XCTAssertEqual(after, ["albums": 1])
    }
}
