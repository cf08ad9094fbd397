// SPDX-License-Identifier: Apache-2.0
import Foundation

/// How the test helpers label a test's store (clients/README.md):
/// `RUN/PACKAGE/TEST`, so that one CI run's stores are removed with
/// `DELETE /stores?label_prefix=RUN/` and two tests of one name in two
/// classes are told apart. For XCTest, PACKAGE is `Module.Class` and TEST
/// the test method.
public enum LarderLabel {
    /// Where the run prefix comes from when the test names none: the first
    /// pair whose variables are both set (an empty second name: no
    /// condition). Shared by every client (`clients/defaults.json`).
    public static let runVariables: [(variable: String, when: String)] = [
        ("LARDER_RUN", ""), ("GITHUB_RUN_ID", "GITHUB_ACTIONS"), ("CI_PIPELINE_ID", "GITLAB_CI"),
        ("BUILDKITE_BUILD_ID", "BUILDKITE"), ("BUILD_TAG", "JENKINS_URL"), ("CIRCLE_WORKFLOW_ID", "CIRCLECI"),
    ]
    /// The longest label the server takes.
    public static let maxBytes = 256

    /// The run prefix: `given`, else the first of ``runVariables`` that is set, else none.
    public static func run(_ given: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let given, !given.isEmpty { return given }
        func set(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        return runVariables.lazy.compactMap { pair in pair.when.isEmpty || set(pair.when) != nil ? set(pair.variable) : nil }.first
    }

    /// `RUN/PACKAGE/TEST` (or `PACKAGE/TEST`), cut to ``maxBytes`` at a character boundary.
    public static func label(run: String?, package: String, test: String) -> String {
        cut([run, package, test].compactMap { $0 }.joined(separator: "/"))
    }

    /// The label of an XCTest test case: PACKAGE `Module.Class`, TEST its method.
    public static func label(of testCase: AnyObject, name: String, run given: String? = nil) -> String {
        label(run: run(given), package: String(reflecting: type(of: testCase)), test: method(of: name))
    }

    /// The method of an XCTest name: `-[Class testThing]` (Apple platforms) or `Class.testThing` (Linux).
    static func method(of name: String) -> String {
        if name.hasPrefix("-["), name.hasSuffix("]"), let space = name.lastIndex(of: " ") {
            return String(name[name.index(after: space)..<name.index(before: name.endIndex)])
        }
        return name.split(separator: ".").last.map(String.init) ?? name
    }

    static func cut(_ text: String) -> String {
        guard text.utf8.count > maxBytes else { return text }
        var kept = ""
        for character in text.unicodeScalars {
            guard kept.utf8.count + String(character).utf8.count <= maxBytes else { break }
            kept.unicodeScalars.append(character)
        }
        return kept
    }
}
