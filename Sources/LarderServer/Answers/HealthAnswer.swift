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
        ("storage", OpenAPI.answer([
            ("file_system", ["type": ["string", "null"], "description": "The root's file system: ext4, xfs, btrfs, tmpfs, overlay, ... (other: one not known; null: not asked)."]),
            ("shares_blocks", ["type": "boolean",
                               "description": "Copies of a store (hand-outs, ready copies, forks, bases, snapshots) share their blocks with what they copy (XFS with reflink, btrfs): any size in well under a millisecond, taking no room until written. False: every byte is copied, and ready copies are bounded by bytes and free room."]),
        ])),
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
            "storage": ["file_system": JSONValue(s.registry.storage.fileSystem), "shares_blocks": .bool(s.registry.storage.sharesBlocks)],
            "cache": ["url": JSONValue(s.cache.fleet?.bucket.url.description), "read_only": .bool(s.cache.fleet?.readOnly ?? s.configuration.cacheReadOnly),
                      "artifacts_url": JSONValue(s.artifactUploads?.bucket.url.description)],
        ]
    }
}
