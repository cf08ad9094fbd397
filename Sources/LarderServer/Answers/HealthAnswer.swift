// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// `GET /health`'s answer: its encoding and its schema.
enum HealthAnswer {
    static let object = ContractObject("Health", OpenAPI.answer([
        ("status", ["type": "string", "enum": ["ok"]]), ("version", OpenAPI.string), ("sqlite_version", OpenAPI.string),
        ("stores", OpenAPI.nonNegative),
        ("templates", ["type": "integer", "minimum": 0,
                       "description": "Templates in the fixtures folder: 0 says the server has nothing to make stores from but uploads and builds."]),
        ("started_at", OpenAPI.time),
        ("cache", OpenAPI.answer([
            ("url", ["type": ["string", "null"], "description": "The fleet's bucket (--cache-url), never with credentials."]),
            ("read_only", OpenAPI.boolean),
            ("artifacts_url", ["type": ["string", "null"], "description": "Where kept stores' artifacts go (--artifacts-url)."]),
        ])),
    ]))

    static func json(_ s: ServerContext) -> JSONValue {
        [
            "status": "ok", "version": .string(LarderVersion.current), "sqlite_version": .string(LarderVersion.sqlite),
            "stores": JSONValue(s.registry.count), "templates": JSONValue(s.catalog.names().count),
            "started_at": .string(s.startedAt.rfc3339),
            "cache": ["url": JSONValue(s.cache.fleet?.bucket.url.description), "read_only": .bool(s.cache.fleet?.readOnly ?? s.configuration.cacheReadOnly),
                      "artifacts_url": JSONValue(s.artifactUploads?.bucket.url.description)],
        ]
    }
}
