// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /health`'s answer: its encoding and its schema.
enum HealthAnswer {
    static let object = ContractObject("Health", OpenAPI.answer([
        ("status", ["type": "string", "enum": ["ok"]]), ("version", OpenAPI.string), ("sqlite_version", OpenAPI.string),
        ("stores", OpenAPI.nonNegative), ("started_at", OpenAPI.time),
    ]))

    static func json(_ s: ServerContext) -> JSONValue {
        [
            "status": "ok", "version": .string(LarderVersion.current), "sqlite_version": .string(LarderVersion.sqlite),
            "stores": JSONValue(s.registry.count), "started_at": .string(s.startedAt.rfc3339),
        ]
    }
}
