// SPDX-License-Identifier: Apache-2.0
import Foundation
import LarderClient
import XCTest

/// An XCTest base class whose ``store`` is a fresh Larder store per test:
/// made in `setUp`, deleted in `tearDown` when the test passed; when it
/// failed, kept (`PATCH keep`), its artifact saved into `LARDER_ARTIFACTS`
/// (default `larder-artifacts/` in the working directory) as
/// `<test name>-<store id>.zip` and, where XCTest has attachments (Apple
/// platforms), attached to the test's result.
///
///     final class AlbumSyncTests: LarderTestCase {
///         override class var template: String? { "gallery" }
///         override class var fixtures: [String] { ["artists", "artworks"] }
///
///         func testSyncAddsAlbum() async throws {
///             let app = try MyApp(databasePath: store.path)
///             try app.sync()
///             try await store.wait("albums>=1", timeout: .seconds(5))
///         }
///     }
///
/// **Remote mode** (``LarderClient/Mode``: `LARDER_MODE=remote`, a
/// `LARDER_URL` whose host is not a loopback address, or a ``client`` made
/// with `mode: .remote`): for tests that cannot open the server's files, as
/// an app's tests in the iOS Simulator cannot. ``store``'s `path` is then a
/// local copy of the store, downloaded in `setUp`; the app opens that, and
/// `store.checkIn()` hands it back whenever the test wants the server to
/// see it (counts, waits and diffs read what was last checked in). At the
/// end a failed test's copy is checked in first, so the kept store and its
/// artifact hold what the test wrote (a check-in that fails is reported as
/// one more failure of the test, and the store is kept as last checked in,
/// with its artifact); a passing test's store is deleted with no upload.
/// Either way the copy's folder is removed. Close the app's connections to
/// the copy before the test ends.
open class LarderTestCase: XCTestCase {
    /// The template the stores come from (nil: an empty store).
    open class var template: String? { nil }
    /// Data fixtures applied in order.
    open class var fixtures: [String] { [] }
    /// A version to migrate to (nil: the server's default, `"latest"`).
    open class var version: String? { nil }
    /// A snapshot of the template to start from.
    open class var snapshot: String? { nil }
    /// The key of an app-built template (`POST /builds`) instead of `template`.
    open class var build: String? { nil }
    /// The run prefix of the stores' labels (`RUN/Module.Class/testMethod`):
    /// nil takes `LARDER_RUN`, else the CI system's run id (``LarderLabel/run(_:environment:)``).
    open class var run: String? { nil }
    /// The client: ``LarderTestServer/client`` (`LARDER_URL`, else a server
    /// this run starts itself; `LARDER_TOKEN`; `LARDER_MODE`) unless overridden.
    open class var client: LarderClient { LarderTestServer.client }
    /// Where artifacts go when `LARDER_ARTIFACTS` says nothing (relative to
    /// the working directory), and the longest test name in an artifact's
    /// file name: shared by every client (`clients/defaults.json`).
    public static let defaultArtifactsDirectory = "larder-artifacts"
    public static let artifactNameMax = 120

    /// Where a failed test's artifact goes: `LARDER_ARTIFACTS`, else `larder-artifacts/` in the working directory.
    open class var artifactsDirectory: URL {
        let given = ProcessInfo.processInfo.environment["LARDER_ARTIFACTS"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultArtifactsDirectory
        return URL(fileURLWithPath: given, isDirectory: true,
                   relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)).standardizedFileURL
    }

    /// This test's store. Made in `setUp() async throws`: a subclass that
    /// overrides it calls `try await super.setUp()` first.
    public private(set) var store: LarderStore!

    /// Where this test's artifact was saved, after `tearDown` of a failed test.
    public private(set) var savedArtifact: URL?

    open override func setUp() async throws {
        try await super.setUp()
        let type = Swift.type(of: self)
        let fixtures = type.fixtures
        // The default client: fails here, saying why, when there is no server to use.
        if type.client === LarderTestServer.unstarted { _ = try LarderTestServer.url() }
        store = try await type.client.createStore(template: type.template, fixtures: fixtures.isEmpty ? nil : fixtures,
                                                  version: type.version, snapshot: type.snapshot,
                                                  label: LarderLabel.label(of: self, name: name, run: type.run), build: type.build)
    }

    open override func tearDown() async throws {
        // `hasSucceeded` is false until the run stops, which is after
        // tearDown; the failure count is what is known by now (thrown errors
        // included).
        let failed = (testRun?.totalFailureCount ?? 0) > 0
        if let store {
            self.store = nil
            if failed {
                if store.isRemote {
                    // What the test wrote goes back first: the kept store and its artifact hold it.
                    do {
                        try await store.checkIn()
                    } catch {
                        XCTFail("larder: the failed test's local copy of store \(store.id) could not be checked in; "
                                + "the store is kept as last checked in: \(error)")
                    }
                    try? await store.close()
                }
                let file = try await LarderTestCase.keep(store, testName: name, in: Swift.type(of: self).artifactsDirectory)
                savedArtifact = file
                #if canImport(Darwin)
                let attachment = XCTAttachment(contentsOfFile: file)
                attachment.name = file.lastPathComponent
                attachment.lifetime = .keepAlways
                add(attachment)
                #endif
            } else {
                do {
                    try await store.delete() // in remote mode its local copy too, with no upload
                } catch let error as LarderError where error.code == "store_not_found" {
                    // The test deleted it itself.
                }
            }
        }
        try await super.tearDown()
    }

    /// Keeps a failed test's store and saves its artifact as
    /// `<directory>/<test name>-<store id>.zip`; answers the file. Static and
    /// with Sendable arguments only, so it runs from any isolation (on Apple
    /// platforms `tearDown() async` runs on the main actor).
    public static func keep(_ store: LarderStore, testName: String, in directory: URL) async throws -> URL {
        _ = try await store.keep()
        let file = directory.appendingPathComponent(fileSafe(testName) + "-" + store.id + ".zip")
        try await store.artifact(to: file)
        // The server's path (in remote mode the local copy is gone by now).
        let location = store.info.path + (store.isRemote ? " on the server" : "")
        FileHandle.standardError.write(Data("larder: \(testName) failed: kept store \(store.id) (\(location)); artifact \(file.path)\n".utf8))
        return file
    }

    /// `-[AlbumTests testSync]` or `AlbumTests.testSync` as a file name: `AlbumTests_testSync` / `AlbumTests.testSync`.
    public static func fileSafe(_ name: String) -> String {
        var out = ""
        var lastWasUnderscore = false
        for scalar in name.unicodeScalars {
            let keep = (scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "._-".unicodeScalars.contains(scalar)))
            if keep {
                out.unicodeScalars.append(scalar)
                lastWasUnderscore = false
            } else if !lastWasUnderscore {
                out += "_"
                lastWasUnderscore = true
            }
        }
        let trimmed = out.trimmingCharacters(in: CharacterSet(charactersIn: "_.-"))
        return trimmed.isEmpty ? "test" : String(trimmed.prefix(LarderTestCase.artifactNameMax))
    }
}
