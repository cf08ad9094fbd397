import Foundation
import LarderClient
import LarderXCTest
import TestSupport
import XCTest

/// A real `larder` whose files this process cannot open, for the remote-mode
/// tests: the package's own binary run by `Tests/support/hidden-larder`
/// (`larder up` in a mount namespace of its own, with a tmpfs over the
/// folder of its root), as a server on another host, or one the iOS
/// Simulator cannot see, would be. A store's `path` in its answers does not
/// exist here; HTTP on loopback works as ever. Started once, at first use;
/// it stops by itself a second after this process ends (`--for`).
enum HiddenServer {
    struct Unavailable: Error { var reason: String }

    private static let started: Result<URL, Error> = Result { try start() }

    /// Its URL; an `XCTSkip` when this machine cannot run it (no binary built, no `unshare`).
    static func url() throws -> URL {
        switch started {
        case .success(let url): return url
        case .failure(let error as Unavailable):
            #if os(Linux)
            // On CI these tests must run, never pass by being skipped.
            if ProcessInfo.processInfo.environment["CI"] == "true" { throw error }
            #endif
            throw XCTSkip(error.reason)
        case .failure(let error): throw error
        }
    }

    /// A client of it in remote mode (its URL is on the loopback address: automatic would be local).
    static func client() throws -> LarderClient {
        LarderClient(url: try url(), token: "", mode: .remote)
    }

    /// The `larder` built with these tests: beside the test binary, else the worktree's debug build.
    static var binary: String? {
        let candidates = LarderTestServer.productFolders().map { $0.appendingPathComponent("larder").path }
            + [repositoryRoot + "/.build/debug/larder"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func start() throws -> URL {
        #if os(Linux)
        guard let binary else { throw Unavailable(reason: "no larder binary built beside the tests (swift build)") }
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        guard path.contains(where: { FileManager.default.isExecutableFile(atPath: $0 + "/unshare") }) else {
            throw Unavailable(reason: "no unshare(1) to hide the server's files with")
        }
        // The wrapper hides the server's files under a fresh
        // $TMPDIR/larder-hidden.XXXXXX, mounted over in the server's
        // namespace; it is left empty here. Nothing removes it while the
        // server runs: removing a mount point from outside detaches the
        // server's files, and it could not stop by itself any more.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: repositoryRoot + "/Tests/support/hidden-larder")
        process.arguments = ["up", "--for", String(ProcessInfo.processInfo.processIdentifier), "--fixtures", sampleFixtures]
        var environment = ProcessInfo.processInfo.environment
        environment["LARDER_HIDDEN_BINARY"] = binary
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // `larder up` prints the URL and ends; the server it starts keeps neither pipe.
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0, let url = URL(string: printed.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw NSError(domain: "HiddenServer", code: Int(process.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "hidden-larder up failed: \(printed) \(said)"])
        }
        return url
        #else
        throw Unavailable(reason: "hidden-larder needs Linux's mount namespaces")
        #endif
    }
}
