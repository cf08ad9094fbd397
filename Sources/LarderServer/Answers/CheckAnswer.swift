// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /checks/migrations`' report and `POST /stores/{id}/check`'s one
/// result: encoding and schemas (a result's members are
/// `MigrationCheck.Report.json`, which `larder check` prints too).
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
        return ["passed": JSONValue(results.count - failed), "failed": JSONValue(failed), "results": .array(results.map(\.json))]
    }
}
