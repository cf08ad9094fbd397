// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /checks/migrations`' report and `POST /stores/{id}/check`'s one
/// result: encoding and schemas.
enum CheckAnswer {
    static let result = ContractObject("CheckResult", OpenAPI.answer([
        ("template", OpenAPI.nullableString), ("kind", ["type": "string", "enum": ["snapshot", "round_trip", "app", "template"]]), ("snapshot", OpenAPI.nullableString),
        ("from_version", OpenAPI.nullableString), ("to_version", OpenAPI.nullableString), ("passed", OpenAPI.boolean),
        ("ms", ["type": "number", "minimum": 0]), ("failures", OpenAPI.strings), ("notes", OpenAPI.strings),
    ]))

    static let report = ContractObject("CheckReport", refers: [result], OpenAPI.answer([
        ("passed", OpenAPI.nonNegative), ("failed", OpenAPI.nonNegative), ("results", ["type": "array", "items": result.ref]),
    ]))

    static func json(_ results: [MigrationCheck.Report]) -> JSONValue {
        let failed = results.filter { !$0.passed }.count
        return ["passed": JSONValue(results.count - failed), "failed": JSONValue(failed), "results": .array(results.map(json))]
    }

    static func json(_ report: MigrationCheck.Report) -> JSONValue {
        ["template": JSONValue(report.template), "kind": .string(report.kind.rawValue), "snapshot": JSONValue(report.snapshot),
         "from_version": JSONValue(report.fromVersion), "to_version": JSONValue(report.toVersion), "passed": .bool(report.passed),
         "ms": .double((report.milliseconds * 100).rounded() / 100), "failures": JSONValue(report.failures), "notes": JSONValue(report.notes)]
    }
}
