import Foundation
import LarderClient
import LarderXCTest
import SQLite
import TestSupport
import XCTest

/// A small sample of LarderTestCase tests, two of which fail on purpose. It
/// runs only in the subprocess that `FailedTestKeepsItsStoreTests` starts
/// (LARDER_SAMPLE_IDS set); in the suite itself it is skipped.
final class LarderSampleTests: LarderTestCase {
    override class var template: String? { "gallery" }
    override class var fixtures: [String] { ["artists", "artworks"] }

    static var idsDirectory: String? { ProcessInfo.processInfo.environment["LARDER_SAMPLE_IDS"] }

    override func setUp() async throws {
        try XCTSkipIf(Self.idsDirectory == nil, "a sample for FailedTestKeepsItsStoreTests, run in its subprocess")
        try await super.setUp()
        // Tell the parent which store this test had.
        let file = Self.idsDirectory! + "/" + name.components(separatedBy: CharacterSet(charactersIn: ". ")).last! + ".id"
        try store.id.write(toFile: file, atomically: true, encoding: .utf8)
    }

    func testPasses() async throws {
        let artists = try await store.counts(tables: ["artists"])
        XCTAssertEqual(artists, ["artists": 4])
    }

    func testFails() async throws {
        let db = try Connection(path: store.path)
        try db.run("INSERT INTO artists (name, born) VALUES ('Written before failing', 1900)")
        XCTFail("failing on purpose: the store must be kept with its artifact")
    }

    func testThrows() async throws {
        try await store.query("SELECT * FROM no_such_table")
    }
}

/// A deliberately failing test, run by the XCTest runner itself in a
/// subprocess: the test binary that `swift test` built, filtered to
/// `LarderSampleTests`, against this process's server. Its failed tests'
/// stores must be kept with their artifacts saved; the passing test's store
/// must be gone.
final class FailedTestKeepsItsStoreTests: XCTestCase {
    func testFailedTestKeepsItsStoreAndSavesItsArtifact() async throws {
        #if os(Linux)
        let scratch = Scratch()
        let ids = scratch.path + "/ids", artifacts = scratch.path + "/artifacts"
        try FileManager.default.createDirectory(atPath: ids, withIntermediateDirectories: true)
        let run = try await Subprocess.runTests("LarderClientTests.LarderSampleTests", in: scratch.path,
                                                environment: ["LARDER_ARTIFACTS": artifacts, "LARDER_SAMPLE_IDS": ids,
                                                              "LARDER_RUN": "swift-run-7"])
        let output = run.output
        XCTAssertEqual(run.status, 1, output)
        XCTAssertTrue(output.contains("Test Case 'LarderSampleTests.testPasses' passed"), output)
        XCTAssertTrue(output.contains("Test Case 'LarderSampleTests.testFails' failed"), output)
        XCTAssertTrue(output.contains("Test Case 'LarderSampleTests.testThrows' failed"), output)

        let larder = ClientTestServer.client
        func id(_ test: String) throws -> String {
            try String(contentsOfFile: ids + "/" + test + ".id", encoding: .utf8)
        }

        // The passing test's store is gone.
        await assertLarderError(404, "store_not_found") { _ = try await larder.store(id: try id("testPasses")) }

        for test in ["testFails", "testThrows"] {
            let kept = try await larder.store(id: try id(test))
            XCTAssertTrue(kept.info.keep, test)
            XCTAssertEqual(kept.info.label, "swift-run-7/LarderClientTests.LarderSampleTests/" + test)
            XCTAssertTrue(output.contains("kept store \(kept.id)"), output)
            let zip = URL(fileURLWithPath: artifacts + "/LarderSampleTests.\(test)-\(kept.id).zip")
            XCTAssertTrue(FileManager.default.fileExists(atPath: zip.path),
                          "\(zip.path) missing; artifacts: \((try? FileManager.default.contentsOfDirectory(atPath: artifacts)) ?? [])")
            let names = try ZipReader.names(zip)
            XCTAssertTrue(names.contains("store.sqlite"), "\(names)")
            XCTAssertTrue(names.contains("manifest.json"), "\(names)")
            let unpacked = scratch.path + "/" + test
            let database = try ZipReader.extract("store.sqlite", from: zip, into: unpacked)
            let artists = try Connection(path: database).scalar("SELECT count(*) FROM artists")?.int64
            // testFails wrote a row before failing: the artifact has it.
            XCTAssertEqual(artists, test == "testFails" ? 5 : 4)
        }
        // The run's kept stores go with one call; another run's stay.
        let other = try await larder.createStore(label: "swift-run-70/elsewhere")
        let removed = try await larder.deleteStores(labelPrefix: "swift-run-7/")
        XCTAssertEqual(removed, 2)
        _ = try await larder.store(id: other.id)
        try await other.delete()
        // Nothing else was saved.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: artifacts).count, 2)
        #else
        throw XCTSkip("runs the test binary as a subprocess the Linux way (swift-corelibs-xctest takes a filter argument)")
        #endif
    }
}

/// A child process with its output in a file (a pipe nobody reads fills up).
enum Subprocess {
    struct Result { var status: Int32; var output: String }

    /// The tests `filter` names, run by this very test binary (on Linux an
    /// executable that takes a filter as its argument) in `directory`,
    /// against this process's server, with `environment` added.
    static func runTests(_ filter: String, in directory: String, environment extra: [String: String]) async throws -> Result {
        var environment = ProcessInfo.processInfo.environment
        environment["LARDER_URL"] = ClientTestServer.server.base
        environment["LARDER_TOKEN"] = ""
        // Under --enable-code-coverage the child must not write over this process's profile.
        environment["LLVM_PROFILE_FILE"] = directory + "/child-%p.profraw"
        environment.merge(extra) { _, given in given }
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        return try await run(binary, [filter], environment: environment, directory: directory, timeout: .seconds(90))
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String], directory: String,
                    timeout: Duration) async throws -> Result {
        let log = directory + "/subprocess-\(UUID().uuidString).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? handle.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = handle
        process.standardError = handle
        let finished = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { finished.continuation.yield($0.terminationStatus); finished.continuation.finish() }
        try process.run()
        let watchdog = Task.detached {
            try await Task.sleep(for: timeout)
            process.terminate()
        }
        var status: Int32 = -1
        for await s in finished.stream { status = s }
        watchdog.cancel()
        return Result(status: status, output: (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }
}
