import Foundation
import LarderClient
@testable import LarderXCTest
import XCTest

/// A test case that names no server: with LARDER_URL unset, its store comes
/// from a server `larder up` started for this test process, found as an
/// app's tests find it (the `larder` product built beside the tests).
final class SelfStartedServerTests: LarderTestCase {
    override class var template: String? { "gallery" }
    override class var fixtures: [String] { ["artists"] }

    override func setUp() async throws {
        try XCTSkipIf(ProcessInfo.processInfo.environment["LARDER_URL"].map { !$0.isEmpty } == true, "LARDER_URL names a server")
        try await super.setUp()
    }

    func testGetsAStoreFromTheServerItStarted() async throws {
        let counts = try await store.counts()
        XCTAssertEqual(counts["artists"], 4)
        let url = try LarderTestServer.url()
        XCTAssertEqual(url.host, "127.0.0.1")
        XCTAssertEqual(Self.client.url, url)
        XCTAssertNotEqual(url.absoluteString, ClientTestServer.server.base)
        // Its root is a folder of this run's, not the default one.
        XCTAssertTrue(store.path.contains("/larder-\(getuid())/"), store.path)
    }
}

final class LarderTestServerTests: XCTestCase {
    var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-test-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: scratch)
    }

    /// The package's own `larder`, as the helper finds it.
    var builtBinary: String {
        get throws { try XCTUnwrap(LarderTestServer.binary(environment: [:]), "build the larder product first (swift build)") }
    }

    func testServesTheGivenProcessAndStopsAfterIt() async throws {
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["60"]
        try sleeper.run()
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = scratch.path
        environment["LARDER_BINARY"] = try builtBinary
        environment["LARDER_URL"] = nil
        let url = try LarderTestServer.start(serving: [sleeper.processIdentifier], environment: environment)
        let client = LarderClient(url: url, token: "")
        let store = try await client.createStore(template: "gallery")
        XCTAssertTrue(store.path.hasPrefix(scratch.path) || store.path.contains("/larder-\(getuid())/"), store.path)
        let runs = scratch.appendingPathComponent("larder-\(getuid())")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: runs.path).count, 1)

        kill(sleeper.processIdentifier, SIGKILL) // (this process may block SIGTERM, and its children with it)
        sleeper.waitUntilExit()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? FileManager.default.contentsOfDirectory(atPath: runs.path))?.isEmpty == false {
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: runs.path), [], "the server outlived the process it served")
    }

    func testNeitherAURLNorABinaryIsOneSentenceWithBothWaysOut() throws {
        XCTAssertThrowsError(try LarderTestServer.start(serving: [getpid()], environment: ["PATH": scratch.path], builtIn: [])) { error in
            XCTAssertEqual("\(error)", LarderTestServer.nothingToUse)
        }
        XCTAssertTrue(LarderTestServer.nothingToUse.contains("LARDER_URL") && LarderTestServer.nothingToUse.contains("LARDER_BINARY"))
    }

    /// A `larder up` that fails as a run's server stops is run again; and a
    /// failure is kept a second at most, so the next test tries anew.
    func testAFailingUpIsRunAgainAndItsFailureNotKept() throws {
        let script = scratch.appendingPathComponent("larder")
        let runs = scratch.appendingPathComponent("runs")
        // Fails twice (as a joining `up` once did), then prints a URL.
        try """
            #!/bin/sh
            echo run >> "\(runs.path)"
            [ "$(wc -l < "\(runs.path)")" -le 2 ] && { echo "larder up: cannot open .../lock: No such file or directory" >&2; exit 2; }
            echo http://127.0.0.1:9
            """.write(to: script, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(script.path, 0o755), 0)
        let url = try LarderTestServer.start(serving: [getpid()], environment: ["LARDER_BINARY": script.path], builtIn: [])
        XCTAssertEqual(url.absoluteString, "http://127.0.0.1:9")
        XCTAssertEqual(try String(contentsOf: runs, encoding: .utf8).split(separator: "\n").count, 3)

        let slot = LarderTestServer.Slot()
        var asked = 0
        let failing = { () throws -> URL in asked += 1; throw LarderTestServer.Unavailable(description: "no") }
        XCTAssertThrowsError(try slot.started(failing))
        XCTAssertThrowsError(try slot.started(failing))
        XCTAssertEqual(asked, 1, "within a second, the same failure")
        Thread.sleep(forTimeInterval: 1.1)
        let found = try slot.started { URL(string: "http://127.0.0.1:10")! }
        XCTAssertEqual(found.url.absoluteString, "http://127.0.0.1:10", "tried anew")
        XCTAssertEqual(try slot.started(failing).url.absoluteString, "http://127.0.0.1:10", "and kept once found")
        XCTAssertTrue(try slot.started(failing).client === found.client)
    }

    func testAFailingUpSaysWhy() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = scratch.path
        environment["LARDER_BINARY"] = try builtBinary
        environment["LARDER_FIXTURES"] = scratch.appendingPathComponent("nope").path
        XCTAssertThrowsError(try LarderTestServer.start(serving: [getpid()], environment: environment)) { error in
            XCTAssertTrue("\(error)".contains("does not exist or is not a folder"), "\(error)")
        }
    }

    func testTheBinaryIsLarderBinaryThenTheBuiltProductThenPath() throws {
        XCTAssertEqual(LarderTestServer.binary(environment: ["LARDER_BINARY": "/opt/x/larder"]), "/opt/x/larder")
        let built = try builtBinary
        XCTAssertTrue(built.hasSuffix("/larder"))
        let onPath = scratch.appendingPathComponent("larder")
        _ = FileManager.default.createFile(atPath: onPath.path, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o755])
        XCTAssertEqual(LarderTestServer.binary(environment: ["PATH": scratch.path]), built)
        XCTAssertEqual(LarderTestServer.binary(environment: ["PATH": "/nowhere:" + scratch.path], builtIn: []), onPath.path)
    }
}
