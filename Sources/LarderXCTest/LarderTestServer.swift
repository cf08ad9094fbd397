// SPDX-License-Identifier: Apache-2.0
import Foundation
import LarderClient

/// Where ``LarderTestCase`` and ``LarderSnapshots`` find their server when a
/// test names none (clients/README.md, as every Larder client does it):
/// `LARDER_URL` when set; otherwise a server of this test run, started
/// once per process with `larder up`, shared with the run's other test
/// processes and stopped a second after the last of them ends.
///
/// The binary is `LARDER_BINARY`, else the `larder` product built beside
/// the tests (`swift build --product larder` in a package that depends on
/// Larder puts it there), else `larder` on `PATH`. The fixtures folder is
/// `LARDER_FIXTURES`, else the first of `fixtures`, `tests/fixtures`,
/// `test/fixtures`, `testdata/fixtures` from the working directory up to
/// the package's top. Where processes cannot be started (iOS, tvOS,
/// watchOS, visionOS: a simulator's tests), set `LARDER_URL`.
public enum LarderTestServer {
    /// Why there is no server to use.
    public struct Unavailable: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The sentence a test fails with when it has neither a URL nor a binary (every client says it alike).
    public static let nothingToUse = "Larder: no server to use: set LARDER_URL to a running server's URL, "
        + "or install the larder binary (set LARDER_BINARY to it, or put it on PATH)"

    /// The server's URL: `LARDER_URL`, else the one `larder up` started for
    /// this process. Kept once found; a failure is not (but for a second, so
    /// one test's setUp asks once): the next test runs `larder up` again.
    public static func url() throws -> URL { try slot.started(find).url }

    /// The client the test helpers use when a test does not name its own:
    /// the found server's, else ``unstarted`` (which `setUp` meets by asking
    /// ``url()`` for the reason).
    public static var client: LarderClient { (try? slot.started(find))?.client ?? unstarted }

    /// The client a test gets while no server could be found.
    public static let unstarted = LarderClient(url: nil)

    static let slot = Slot()

    private static func find() throws -> URL {
        let environment = ProcessInfo.processInfo.environment
        if let given = environment["LARDER_URL"], !given.isEmpty {
            guard let url = URL(string: given) else { throw Unavailable(description: "LARDER_URL is not a URL: \(given)") }
            return url
        }
        return try start(serving: servedProcesses(), environment: environment)
    }

    /// A server found once and kept, with its client; a failure kept a second at most.
    final class Slot: @unchecked Sendable {
        private let lock = NSLock()
        private var found: (url: URL, client: LarderClient)?
        private var failed: (Unavailable, Date)?

        func started(_ find: () throws -> URL) throws -> (url: URL, client: LarderClient) {
            lock.lock()
            defer { lock.unlock() }
            if let found { return found }
            if let (failure, at) = failed, Date().timeIntervalSince(at) < 1 { throw failure }
            do {
                let url = try find()
                let started = (url: url, client: LarderClient(url: url))
                found = started
                return started
            } catch {
                let failure = error as? Unavailable ?? Unavailable(description: "\(error)")
                failed = (failure, Date())
                throw failure
            }
        }
    }

    /// This process and, when `swift test` runs it, `swift test` itself,
    /// which lives for the whole run (its parallel workers share a server).
    static func servedProcesses() -> [Int32] {
        var pids = [ProcessInfo.processInfo.processIdentifier]
        #if os(Linux)
        let parent = getppid()
        if let comm = try? String(contentsOfFile: "/proc/\(parent)/comm", encoding: .utf8),
           comm.trimmingCharacters(in: .whitespacesAndNewlines) == "swift-test" {
            pids.append(parent)
        }
        #endif
        return pids
    }

    /// The `larder` to start: `LARDER_BINARY`, the package's own build beside these tests, `PATH`.
    public static func binary(environment: [String: String] = ProcessInfo.processInfo.environment,
                              builtIn: [URL] = productFolders()) -> String? {
        if let given = environment["LARDER_BINARY"], !given.isEmpty { return given }
        let path = (environment["PATH"] ?? "").split(separator: ":").map { URL(fileURLWithPath: String($0), isDirectory: true) }
        return (builtIn + path).lazy.map { $0.appendingPathComponent("larder").path }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Where SwiftPM puts this package's products: beside the test executable
    /// (Linux), or beside the test bundle that xctest loads (macOS).
    public static func productFolders() -> [URL] {
        var folders: [URL] = []
        if let executable = Bundle.main.executablePath { folders.append(URL(fileURLWithPath: executable).deletingLastPathComponent()) }
        folders.append(Bundle(for: LarderTestCase.self).bundleURL.deletingLastPathComponent())
        return folders
    }

    /// The pauses before running a `larder up` that exited non-zero again:
    /// one that joins a server as it stops can fail, and a moment later it
    /// starts a new one.
    static let retryDelays: [TimeInterval] = [0.2, 0.5]

    /// Runs `larder up --for PID...` in the working directory and answers the
    /// URL it prints; one that exits non-zero is run again after each of
    /// `retryDelays`, and the error is its last run's.
    public static func start(serving pids: [Int32], environment: [String: String] = ProcessInfo.processInfo.environment,
                             builtIn: [URL] = productFolders()) throws -> URL {
        #if os(macOS) || os(Linux)
        guard let binary = binary(environment: environment, builtIn: builtIn) else { throw Unavailable(description: nothingToUse) }
        for delay in retryDelays {
            if let url = try runUp(binary, serving: pids, environment: environment, lastTry: false) { return url }
            Thread.sleep(forTimeInterval: delay)
        }
        guard let url = try runUp(binary, serving: pids, environment: environment, lastTry: true) else {
            throw Unavailable(description: "Larder: \(binary) up failed")
        }
        return url
        #else
        throw Unavailable(description: "Larder: tests on this platform cannot start a server: set LARDER_URL")
        #endif
    }

    #if os(macOS) || os(Linux)
    /// One run of `binary up`: its URL, or nil when it exited non-zero and
    /// this is not the `lastTry` (which throws what it said instead).
    private static func runUp(_ binary: String, serving pids: [Int32], environment: [String: String], lastTry: Bool) throws -> URL? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["up"] + pids.flatMap { ["--for", String($0)] }
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Unavailable(description: "Larder: cannot run \(binary): \(error)")
        }
        // `larder up` says little and ends; the server it starts keeps neither pipe.
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let line = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, let url = URL(string: line), url.scheme == "http" else {
            if process.terminationStatus != 0 && !lastTry { return nil }
            throw Unavailable(description: "Larder: \(binary) up failed (exit \(process.terminationStatus)): "
                              + said.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return url
    }
    #endif
}
