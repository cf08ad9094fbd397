import Foundation
import LarderClient
import TestSupport
import XCTest

/// Which mode a client works in.
final class ModeTests: XCTestCase {
    func testModeResolution() throws {
        let local = URL(string: "http://127.0.0.1:7464")!, elsewhere = URL(string: "http://larder.ci.example:7464")!
        XCTAssertEqual(try LarderClient.resolveMode(url: local, environment: [:]), .local)
        XCTAssertEqual(try LarderClient.resolveMode(url: elsewhere, environment: [:]), .remote, "not on loopback: remote")
        XCTAssertEqual(try LarderClient.resolveMode(url: nil, environment: [:]), .local, "a self-started server")
        XCTAssertEqual(try LarderClient.resolveMode(url: nil, environment: ["LARDER_MODE": "remote"]), .remote)
        XCTAssertEqual(try LarderClient.resolveMode(url: local, environment: ["LARDER_MODE": "remote"]), .remote)
        XCTAssertEqual(try LarderClient.resolveMode(url: elsewhere, environment: ["LARDER_MODE": "local"]), .local)
        XCTAssertEqual(try LarderClient.resolveMode(url: elsewhere, environment: ["LARDER_MODE": ""]), .remote, "empty: unset")
        XCTAssertEqual(try LarderClient.resolveMode(.local, url: elsewhere, environment: ["LARDER_MODE": "remote"]), .local, "the option beats the variable")
        XCTAssertEqual(try LarderClient.resolveMode(.remote, url: local, environment: ["LARDER_MODE": "nonsense"]), .remote)
        for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "0:0:0:0:0:0:0:1", "[0::1]", "localhost."] {
            XCTAssertTrue(LarderClient.isLoopback(host: host), host)
        }
        for host in ["10.0.0.5", "128.0.0.1", "127.0.0.256", "::2", "::", "larder", "127.0.0.1.example", "1::1", ""] {
            XCTAssertFalse(LarderClient.isLoopback(host: host), host)
        }
        XCTAssertEqual(try LarderClient.resolveMode(url: URL(string: "http://[::1]:7464")!, environment: [:]), .local)
        XCTAssertEqual(try LarderClient.resolveMode(url: URL(string: "http://192.168.64.1:7464")!, environment: [:]), .remote)

        do {
            _ = try LarderClient.resolveMode(url: local, environment: ["LARDER_MODE": "Remote-ish"])
            XCTFail("a bad LARDER_MODE resolved")
        } catch let error as LarderError {
            XCTAssertEqual(error.code, "bad_mode")
            XCTAssertEqual(error.status, 0)
            XCTAssertTrue(error.message.hasPrefix(#"LARDER_MODE is "Remote-ish": set it to "remote" or "local""#), error.message)
            XCTAssertEqual(error.details["value"], "Remote-ish")
        }
    }

    /// A client made while LARDER_MODE is wrong says so at the first call
    /// that needs the mode, before it asks the server anything.
    func testABadLarderModeFailsTheCallsThatNeedIt() async throws {
        let previous = ProcessInfo.processInfo.environment["LARDER_MODE"]
        setenv("LARDER_MODE", "sometimes", 1)
        let larder = LarderClient(url: URL(string: ClientTestServer.server.base)!, token: "")
        let explicit = LarderClient(url: URL(string: ClientTestServer.server.base)!, token: "", mode: .local)
        if let previous { setenv("LARDER_MODE", previous, 1) } else { unsetenv("LARDER_MODE") }

        XCTAssertEqual(larder.mode, .automatic)
        XCTAssertFalse(larder.isRemote)
        XCTAssertThrowsError(try larder.resolvedMode())
        await assertLarderError(0, "bad_mode") { _ = try await larder.createStore(label: "never-made-bad-mode") }
        await assertLarderError(0, "bad_mode") { _ = try await larder.build(key: "never-built-bad-mode") { _ in } }
        let none = try await ClientTestServer.client.stores(label: "never-made-bad-mode")
        XCTAssertEqual(none.count, 0)
        // Calls that do not depend on the mode work; the option beats the variable.
        _ = try await larder.health()
        XCTAssertEqual(try explicit.resolvedMode(), .local)
        let store = try await explicit.createStore()
        XCTAssertFalse(store.isRemote)
        try await store.checkIn() // local mode: nothing to hand back
        try await store.close()
        try await store.delete()
    }

    /// The default client of a URL off this machine is remote; one on loopback is local.
    func testTheURLDecidesWhenNothingElseDoes() throws {
        try XCTSkipIf(ProcessInfo.processInfo.environment["LARDER_MODE"].map { !$0.isEmpty } == true, "LARDER_MODE is set")
        XCTAssertTrue(LarderClient(url: URL(string: "http://10.1.2.3:7464")!).isRemote)
        XCTAssertEqual(try LarderClient(url: URL(string: "http://10.1.2.3:7464")!).resolvedMode(), .remote)
        XCTAssertFalse(LarderClient(url: URL(string: "http://localhost:7464")!).isRemote)
    }
}
