import Foundation
import GRDB
import LarderClient
import LarderXCTest
import TestSupport
import XCTest

/// LarderTestCase tests in remote mode, two of which fail on purpose. They
/// run only in the subprocess that `RemoteTestCaseEndsTests` starts
/// (LARDER_REMOTE_SAMPLE set, against the hidden server); in the suite
/// itself they are skipped.
final class LarderRemoteSampleTests: LarderTestCase {
    override class var template: String? { "gallery" }
    override class var fixtures: [String] { ["artists"] }

    static var notes: String? { ProcessInfo.processInfo.environment["LARDER_REMOTE_SAMPLE"] }

    override func setUp() async throws {
        try XCTSkipIf(Self.notes == nil, "a sample for RemoteTestCaseEndsTests, run in its subprocess")
        try await super.setUp()
        // Tell the parent which store, and which local copy, this test had.
        let test = name.components(separatedBy: CharacterSet(charactersIn: ". ")).last!
        try (store.id + "\n" + store.path).write(toFile: Self.notes! + "/" + test, atomically: true, encoding: .utf8)
    }

    func testPasses() async throws {
        XCTAssertTrue(store.isRemote)
        try RemoteModeTests.write(store.path, "INSERT INTO artists (name, born) VALUES ('Written by a passing test', 1900)")
        try await store.checkIn()
        let counts = try await store.counts(tables: ["artists"])
        XCTAssertEqual(counts, ["artists": 5])
    }

    func testFails() async throws {
        try RemoteModeTests.write(store.path, "INSERT INTO artists (name, born) VALUES ('Written before failing', 1900)")
        XCTFail("failing on purpose: the copy must be checked in, the store kept with its artifact")
    }

    func testFailsWithABrokenCopy() async throws {
        try Data("not a database at all".utf8).write(to: store.fileURL)
        XCTFail("failing on purpose, with a copy the server refuses")
    }
}

/// How a LarderTestCase test ends in remote mode, run by the XCTest runner
/// in a subprocess against the hidden server: a failed test's copy is
/// checked in, then the store kept and its artifact saved; a passing test's
/// store is deleted with no upload; no local copy is left either way.
final class RemoteTestCaseEndsTests: XCTestCase {
    func testFailedTestsCheckInAndKeepPassingTestsLeaveNothing() async throws {
        #if os(Linux)
        let url = try HiddenServer.url()
        let scratch = Scratch()
        let notes = scratch.path + "/notes", artifacts = scratch.path + "/artifacts", tmp = scratch.path + "/tmp"
        for folder in [notes, tmp] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let run = try await Subprocess.runTests("LarderClientTests.LarderRemoteSampleTests", in: scratch.path,
                                                environment: ["LARDER_URL": url.absoluteString, "LARDER_MODE": "remote",
                                                              "LARDER_ARTIFACTS": artifacts, "LARDER_REMOTE_SAMPLE": notes,
                                                              "LARDER_RUN": "swift-remote-run", "TMPDIR": tmp])
        let output = run.output
        XCTAssertEqual(run.status, 1, output)
        XCTAssertTrue(output.contains("Test Case 'LarderRemoteSampleTests.testPasses' passed"), output)
        XCTAssertTrue(output.contains("Test Case 'LarderRemoteSampleTests.testFails' failed"), output)
        XCTAssertTrue(output.contains("Test Case 'LarderRemoteSampleTests.testFailsWithABrokenCopy' failed"), output)

        let larder = try HiddenServer.client()
        func note(_ test: String) throws -> (id: String, path: String) {
            let lines = try String(contentsOfFile: notes + "/" + test, encoding: .utf8).split(separator: "\n").map(String.init)
            return (lines[0], lines[1])
        }
        // No local copy is left, passed or failed.
        for test in ["testPasses", "testFails", "testFailsWithABrokenCopy"] {
            let path = try note(test).path
            XCTAssertTrue(path.hasPrefix(tmp + "/larder-remote-"), path)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), path)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmp).filter { $0.hasPrefix("larder-remote-") }, [])

        // The passing test's store is gone.
        await assertLarderError(404, "store_not_found") { _ = try await larder.store(id: try note("testPasses").id) }
        let passing = try await larder.stores(label: "swift-remote-run/LarderClientTests.LarderRemoteSampleTests/testPasses")
        XCTAssertEqual(passing.count, 0)

        // The failed test's copy was checked in: its store kept with the test's row, in /diff and in the artifact.
        let failed = try await larder.store(id: try note("testFails").id)
        XCTAssertTrue(failed.info.keep)
        XCTAssertEqual(failed.info.counts["artists"], 5)
        let diff = try await failed.diff(tables: ["artists"])
        XCTAssertEqual(diff["tables"]?["artists"]?["rows"]?[0]?["new"]?["name"]?.stringValue, "Written before failing", "\(diff)")
        let zip = URL(fileURLWithPath: artifacts + "/LarderRemoteSampleTests.testFails-\(failed.id).zip")
        let database = try ZipReader.extract("store.sqlite", from: zip, into: scratch.path + "/testFails")
        XCTAssertEqual(try RemoteModeTests.count("artists", in: database), 5)

        // A copy the server refuses: said in the test's failures, the store kept as it was, its artifact saved.
        let broken = try await larder.store(id: try note("testFailsWithABrokenCopy").id)
        XCTAssertTrue(output.contains("the failed test's local copy of store \(broken.id) could not be checked in"), output)
        XCTAssertTrue(broken.info.keep)
        XCTAssertEqual(broken.info.counts["artists"], 4)
        let brokenZip = artifacts + "/LarderRemoteSampleTests.testFailsWithABrokenCopy-\(broken.id).zip"
        XCTAssertTrue(FileManager.default.fileExists(atPath: brokenZip), brokenZip)

        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: artifacts).count, 2)
        let removed = try await larder.deleteStores(labelPrefix: "swift-remote-run/")
        XCTAssertEqual(removed, 2)
        #else
        throw XCTSkip("runs the test binary as a subprocess the Linux way (swift-corelibs-xctest takes a filter argument)")
        #endif
    }
}

/// LarderSnapshots and checkSnapshot in remote mode, against the hidden server.
final class RemoteSnapshotCheckTests: XCTestCase {
    /// The snapshot check with the app's own migrator (GRDB's) in remote
    /// mode: it runs on the local copy, which goes back before the check.
    /// The reference is a store the same migrator made from nothing, here.
    func testAppMigratedSnapshotsAreCheckedOnTheLocalCopy() async throws {
        let larder = try HiddenServer.client()
        let scratch = Scratch()
        let folder = try AppModel.snapshots(in: scratch.path + "/Snapshots", expect: #"{"before": ["SELECT count(*) = 3 FROM artist"], "counts": {"artist": 3}}"#)
        let fresh = scratch.path + "/fresh.sqlite"
        try AppModel.migrate(fresh, .good)
        let reference = try await larder.uploadStore(file: URL(fileURLWithPath: fresh), label: "remote-reference")
        try await reference.close()

        final class Paths: @unchecked Sendable { var seen: [String] = [] }
        let paths = Paths()
        let artifacts = URL(fileURLWithPath: scratch.path + "/artifacts")
        let results = try await LarderSnapshots(client: larder, artifactsDirectory: artifacts)
            .check(in: folder, against: .store(reference.id)) { path in
                paths.seen.append(path)
                try AppModel.migrate(path, .good)
            }
        XCTAssertEqual(results.map(\.failures), [[]])
        XCTAssertEqual(results.first?.toVersion, "v2")
        XCTAssertEqual(paths.seen.count, 1)
        XCTAssertTrue(paths.seen[0].contains("/larder-remote-"), paths.seen[0])
        XCTAssertFalse(FileManager.default.fileExists(atPath: paths.seen[0]), "the local copy is removed")
        await assertLarderError(404, "store_not_found") { _ = try await larder.store(id: try XCTUnwrap(results.first?.storeID)) }

        // A lossy migration: judged as migrated, so the copy was checked in.
        let lossy = try await larder.checkSnapshot(folder.appendingPathComponent("v1.sqlite"), against: .store(reference.id)) { path in
            try AppModel.migrate(path, .lossy)
        }
        XCTAssertTrue(lossy.failures.contains("artist.born held 3 non-NULL values; the migrated store has no column born"), "\(lossy.failures)")
        let kept = try await larder.store(id: try XCTUnwrap(lossy.storeID))
        XCTAssertTrue(kept.info.keep)
        XCTAssertFalse(kept.isRemote, "a store found by id has no local copy")
        try await kept.delete()
        try await reference.delete()
    }
}
