// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// What `POST /stores/{id}/migrate` and `GET /stores/{id}/migrations`
/// answer: encodings and schemas.
enum MigrationAnswer {
    static let migrated = ContractObject("Migrated", OpenAPI.answer([
        ("from", OpenAPI.nullableString), ("to", OpenAPI.nullableString),
        ("applied", ["type": "array", "items": OpenAPI.answer([
            ("version", OpenAPI.string), ("name", OpenAPI.string), ("ms", ["type": "number", "minimum": 0]),
            ("direction", ["type": "string", "enum": ["up", "down", "repeatable"]])])]),
    ]))

    static let status = ContractObject("Migrations", OpenAPI.answer([
        ("version", OpenAPI.nullableString), ("dirty", OpenAPI.boolean),
        ("migrations", ["type": "array", "items": OpenAPI.answer([
            ("version", OpenAPI.string), ("name", OpenAPI.string), ("state", ["type": "string", "enum": ["applied", "pending"]])])]),
    ]))

    static func json(_ outcome: Migrator.Run) -> JSONValue {
        [
            "from": JSONValue(outcome.from), "to": JSONValue(outcome.to),
            "applied": .array(outcome.applied.map {
                ["version": .string($0.version), "name": .string($0.name), "ms": JSONValue($0.milliseconds), "direction": .string($0.direction)]
            }),
        ]
    }

    static func json(_ status: StoreEditor.MigrationStatus) -> JSONValue {
        [
            "version": JSONValue(status.version), "dirty": .bool(status.dirty),
            "migrations": .array(status.migrations.map {
                ["version": .string($0.version), "name": .string($0.name), "state": .string($0.applied ? "applied" : "pending")]
            }),
        ]
    }
}
