// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// Query values checked like body fields.
extension Request {
    func queryInt(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = queryValue(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw LarderError(.badRequest, "query parameter '\(name)' must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'",
                              details: [("parameter", .string(name))])
        }
        return value
    }

    /// A long poll's `timeout_ms`: within `--wait-timeout-max-ms`, the default when absent.
    func waitTimeoutMs(_ configuration: Configuration) throws -> Int {
        try queryInt("timeout_ms", in: 0...configuration.waitTimeoutMaxMs) ?? configuration.defaultWaitTimeoutMs
    }

    /// Refuses query parameters a route does not know.
    func checkQuery(allowed: Set<String>) throws {
        if let unknown = query.first(where: { !allowed.contains($0.name) }) {
            throw LarderError(.badRequest, "unknown query parameter '\(unknown.name)'" + (allowed.isEmpty ? "" : "; known: \(allowed.sorted().joined(separator: ", "))"),
                              details: [("parameter", .string(unknown.name))])
        }
    }
}
