// SPDX-License-Identifier: Apache-2.0
import Foundation
import LarderClient
import XCTest

/// Snapshot checks in XCTest: every old database of a folder (the files old
/// app versions wrote, kept in the repository) is uploaded, migrated by the
/// app's own migrator and judged by Larder; each failed snapshot is one test
/// failure listing every message, and its migrated store is kept with its
/// artifact saved beside the other failed tests'.
///
/// In remote mode (``LarderClient/Mode``) the app's migrator runs on a local
/// copy of each uploaded store, which is checked in before the server judges
/// it (`POST /stores/{id}/check`): what an iOS team needs whose tests run in
/// the Simulator, which cannot open the server's files. The call is the same.
///
///     func testOldDatabasesMigrate() async throws {
///         let snapshots = Bundle.module.resourceURL!.appendingPathComponent("Snapshots")
///         try await LarderSnapshots().check(in: snapshots, against: .build(modelKey)) { path in
///             try AppDatabase.migrator.migrate(DatabaseQueue(path: path))
///         }
///     }
public struct LarderSnapshots: Sendable {
    public let client: LarderClient
    /// Where a failed snapshot's artifact goes (as ``LarderTestCase``'s).
    public var artifactsDirectory: URL

    public init(client: LarderClient = LarderTestServer.client, artifactsDirectory: URL = LarderTestCase.artifactsDirectory) {
        self.client = client
        self.artifactsDirectory = artifactsDirectory
    }

    /// Checks every `*.sqlite` file of `directory` (with its `NAME.expect.json`
    /// when there is one): one XCTest failure per failed snapshot, at the
    /// caller's line. Answers the results. A folder without snapshots is a
    /// failure too: nothing checked is never a pass.
    @discardableResult
    public func check(in directory: URL, against reference: LarderClient.Reference, file: StaticString = #filePath, line: UInt = #line,
                      migrate: (String) async throws -> Void) async throws -> [LarderClient.CheckResult] {
        // Made while no server could be found: found now, or the reason why not.
        var client = self.client
        if client === LarderTestServer.unstarted {
            _ = try LarderTestServer.url()
            client = LarderTestServer.client
        }
        let results = try await client.checkSnapshots(in: directory, against: reference, migrate: migrate)
        if results.isEmpty { XCTFail("no snapshots (*.sqlite) in \(directory.path)", file: file, line: line) }
        for result in results where !result.passed {
            var message = result.report
            if let id = result.storeID {
                let store = try await client.store(id: id)
                let saved = try await LarderTestCase.keep(store, testName: "snapshot " + (result.snapshot ?? id), in: artifactsDirectory)
                message += "\n  artifact: \(saved.path)"
            }
            XCTFail(message, file: file, line: line)
        }
        return results
    }
}
