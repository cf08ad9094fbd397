import Foundation
@testable import LarderCore
@testable import LarderServer
import Logging
import MicroHTTP
import Platform
import Synchronization
import XCTest

/// What a log handler was given, for a test to read.
final class LoggedLines: LogHandler, @unchecked Sendable {
    let lines = Mutex<[(level: Logger.Level, message: String)]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        lines.withLock { $0.append((event.level, event.message.description)) }
    }
}

/// The server as `larder serve` builds it, on a socket.
final class LarderAppTests: XCTestCase {
    /// A server for its own user's processes (`larder up`) answers only
    /// them where the kernel tells who is at the other end (Linux); where it
    /// cannot (the portable calls) it serves every connection and says so,
    /// rather than refuse them all.
    func testAServerForItsOwnUserChecksThePeerOnlyWhereTheSystemTellsIt() throws {
        for portable in [false, true] {
            try Syscalls.forcing(portable: portable) {
                let root = scratchRoot("own-user")
                defer { try? FileManager.default.removeItem(atPath: root) }
                var configuration = serverConfiguration(root: root)
                configuration.host = "127.0.0.1"
                configuration.port = 0
                configuration.ownUserOnly = true
                let logged = LoggedLines()
                let app = try LarderApp(configuration: configuration, logger: Logger(label: "test") { _ in logged })
                try app.start()
                defer { app.stop() }
                XCTAssertEqual(app.server.settings.peerUsers, portable ? nil : [getuid(), 0])
                XCTAssertEqual(try Probe.get(app.listenURL, path: "/health", timeoutMs: 10_000).status, 200, "portable: \(portable)")
                let warnings = logged.lines.withLock { $0 }.filter { $0.level == .warning }.map(\.message)
                XCTAssertEqual(warnings.contains { $0.contains("every user of this machine can reach this server") }, portable, "\(warnings)")
            }
        }
    }
}
