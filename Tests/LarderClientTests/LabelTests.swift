import Foundation
import LarderXCTest
import XCTest

/// `RUN/Module.Class/testMethod`: the run from the test, LARDER_RUN, or the CI system's run id.
final class LabelTests: XCTestCase {
    func testTheRunComesFromTheTestThenLarderRunThenTheCISystem() {
        XCTAssertNil(LarderLabel.run(environment: [:]))
        XCTAssertEqual(LarderLabel.run(environment: ["LARDER_RUN": "r1", "GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"]), "r1")
        XCTAssertEqual(LarderLabel.run("mine", environment: ["LARDER_RUN": "r1"]), "mine")
        XCTAssertEqual(LarderLabel.run("", environment: ["LARDER_RUN": "r1"]), "r1")
        let systems: [[String: String]: String] = [
            ["GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "123"]: "123",
            ["GITLAB_CI": "true", "CI_PIPELINE_ID": "456"]: "456",
            ["BUILDKITE": "true", "BUILDKITE_BUILD_ID": "0190-ab"]: "0190-ab",
            ["JENKINS_URL": "http://ci/", "BUILD_TAG": "jenkins-shop-42"]: "jenkins-shop-42",
            ["CIRCLECI": "true", "CIRCLE_WORKFLOW_ID": "wf-9"]: "wf-9",
        ]
        for (environment, run) in systems { XCTAssertEqual(LarderLabel.run(environment: environment), run, "\(environment)") }
        // A run id without its CI system's own variable is someone else's variable.
        XCTAssertNil(LarderLabel.run(environment: ["GITHUB_RUN_ID": "123", "BUILD_TAG": "x", "LARDER_RUN": ""]))
    }

    func testTheLabelNamesTheClassAndItsModuleAndIsCutAtACharacter() {
        XCTAssertEqual(LarderLabel.label(run: "9", package: "Shop.OrdersTests", test: "testCheckout"), "9/Shop.OrdersTests/testCheckout")
        XCTAssertEqual(LarderLabel.label(run: nil, package: "Shop.OrdersTests", test: "testCheckout"), "Shop.OrdersTests/testCheckout")
        XCTAssertEqual(LarderLabel.label(of: self, name: "-[LabelTests testX]", run: "r"), "r/LarderClientTests.LabelTests/testX")
        XCTAssertEqual(LarderLabel.label(of: self, name: "LabelTests.testX", run: "r"), "r/LarderClientTests.LabelTests/testX")
        for character in ["é", "€", "😀"] {
            let long = LarderLabel.label(run: "r", package: "P", test: String(repeating: character, count: 200))
            XCTAssertLessThanOrEqual(long.utf8.count, 256)
            XCTAssertGreaterThan(long.utf8.count, 256 - character.utf8.count)
            XCTAssertTrue(long.hasPrefix("r/P/" + character))
            XCTAssertEqual(String(decoding: Array(long.utf8), as: UTF8.self), long, "valid UTF-8")
        }
    }
}
