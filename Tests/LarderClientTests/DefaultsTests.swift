import Foundation
import LarderClient
import LarderXCTest
import TestSupport
import XCTest

/// The Swift client's defaults are the ones every client shares: `clients/defaults.json`.
final class DefaultsTests: XCTestCase {
    func testTheConstantsAreTheSharedDefaults() throws {
        func ms(_ d: Duration) -> LarderValue { .int(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000) }
        let constants: [String: LarderValue] = [
            "default_url": .string(LarderClient.defaultURL.absoluteString),
            "request_timeout_ms": ms(LarderClient.Defaults.requestTimeout),
            "wait_timeout_ms": ms(LarderClient.Defaults.waitTimeout),
            "build_timeout_ms": ms(LarderClient.Defaults.buildTimeout),
            "build_poll_ms": ms(LarderClient.Defaults.buildPoll),
            "download_timeout_ms": ms(LarderClient.Defaults.downloadTimeout),
            "finish_attempts": .int(Int64(LarderClient.Defaults.finishAttempts)),
            "retry_after_default_ms": ms(LarderClient.Defaults.retryAfterDefault),
            "retry_after_max_ms": ms(LarderClient.Defaults.retryAfterMax),
            "artifacts_dir": .string(LarderTestCase.defaultArtifactsDirectory),
            "artifact_name_max_chars": .int(Int64(LarderTestCase.artifactNameMax)),
            "run_variables": .array(LarderLabel.runVariables.map { .array([.string($0.variable), .string($0.when)]) }),
            "label_max_bytes": .int(Int64(LarderLabel.maxBytes)),
        ]
        let data = try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/clients/defaults.json"))
        var table: [String: LarderValue] = [:]
        for (name, entry) in try JSONDecoder().decode([String: LarderValue].self, from: data) where !name.hasPrefix("_") {
            table[name] = try XCTUnwrap(entry.objectValue?["value"], name)
        }
        XCTAssertEqual(Set(table.keys), Set(constants.keys), "an entry of clients/defaults.json has no constant here, or one too many")
        for (name, value) in table { XCTAssertEqual(constants[name], value, name) }
    }
}
