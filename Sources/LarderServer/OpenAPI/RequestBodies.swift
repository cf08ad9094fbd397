// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The request bodies of the contract, each described once (`BodyFields`):
/// the routes read them by these descriptions and the document states them,
/// so a generator such as schemathesis sends nothing the document allows
/// and the server refuses, or the other way round.
enum RequestBody {
    typealias Field = BodyFields.Field

    static let ttl = Field.integer("ttl_seconds", { _ in StoreRecord.ttlSeconds },
                                   description: "Seconds until the store expires (1 s to 365 days); null or absent: the server's default.")
    static let label = Field.string("label", OpenAPI.label)

    static let createStore = BodyFields(name: "CreateStore", fields: [
        .string("template", ["type": ["string", "null"], "pattern": OpenAPI.templatePattern]),
        .string("version", ["type": ["string", "null"], "description": "\"latest\" (the default) or a version; null keeps a snapshot as it is."]),
        .string("snapshot", OpenAPI.nullableString), .strings("fixtures", ["type": ["array", "null"], "items": ["type": "string"]]),
        label, ttl,
        .string("from", ["type": ["string", "null"], "description": "The id of a live store to fork; not with `template`, `snapshot` or `version`."]),
        .string("build", ["type": ["string", "null"], "pattern": "^[A-Za-z0-9._-]{1,128}$",
                          "description": "The key of an app-built template to copy; not with `template` or `from`."]),
        .integer("timeout_ms", { c in 0...c.waitTimeoutMaxMs }, description: "How long to wait while the build is building (default 30000); only with `build`."),
    ], extra: { _ in
        let isString: (String) -> JSONValue = { ["required": [.string($0)], "properties": [$0: ["type": "string"]]] }
        let isNull: (String) -> JSONValue = { ["required": [.string($0)], "properties": [$0: ["type": "null"]]] }
        return [("allOf", [
            // A build is copied as it is.
            ["if": isString("build"), "then": ["properties": ["template": ["type": "null"], "from": ["type": "null"]]],
             "else": ["properties": ["timeout_ms": ["type": "null"]]]],
            // A fork is of a store as it is; without a template there is nothing to migrate or snapshot.
            ["if": isString("template"), "then": ["properties": ["from": ["type": "null"]]],
             "else": ["not": ["required": ["version"]], "properties": ["snapshot": ["type": "null"]]]],
            // Named fixtures come from a template, or from the template of the store forked.
            ["if": ["not": ["anyOf": [isString("template"), isString("from")]]], "then": ["properties": ["fixtures": ["type": "null"]]]],
            // `"version": null` keeps a snapshot as it is, so it needs one.
            ["if": isNull("version"), "then": isString("snapshot")],
        ]), ("examples", [[:], ["template": "gallery", "fixtures": ["artists", "artworks"], "label": "test_album_sync", "ttl_seconds": 600]])]
    })

    static let signIn = BodyFields(name: "SignIn", fields: [.string("token", ["type": "string", "minLength": 1, "maxLength": 1024])], required: ["token"])

    static let patchStore = BodyFields(name: "PatchStore", fields: [
        .value("keep", ["oneOf": [["type": ["boolean", "null"]], ["const": "forever"]],
                        "description": "true: kept for --kept-ttl-seconds (or ttl_seconds) from now; \"forever\": until deleted; false: its ordinary ttl from now"]),
        ttl, label,
    ], extra: { _ in [("examples", [["keep": true, "ttl_seconds": 86400]])] })

    static let loadFixtures = BodyFields(name: "LoadFixtures", fields: [
        .strings("fixtures", OpenAPI.strings), .string("sql", OpenAPI.sql),
        .value("rows", ["type": "object", "description": "Table name to rows, each row a non-empty object of columns.",
                        "additionalProperties": ["type": "array", "items": ["type": "object", "minProperties": 1]]]),
    ], extra: { _ in [("minProperties", 1), ("maxProperties", 1), ("description", "Exactly one of `fixtures`, `sql` and `rows`."),
                      ("examples", [["sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"], ["rows": ["notes": [["body": "hello"]]]]])] })

    static let migrate = BodyFields(name: "Migrate", fields: [
        .string("to", ["type": ["string", "null"], "description": "\"latest\" (the default) or a version."]),
    ], extra: { _ in [("examples", [["to": "latest"]])] })

    static let query = BodyFields(name: "Query", fields: [
        .string("sql", ["type": "string", "minLength": 1, "pattern": OpenAPI.noNUL,
                        "description": "One SQL statement (blanks and comments alone are a 400, as are two statements, or a NUL character)."]),
        .value("params", ["type": ["array", "object", "null"], "description": "Values for `?` (an array) or for named parameters (an object)."]),
        .integer("max_rows", { c in 1...c.queryRowLimit }),
        .integer("timeout_ms", { c in 1...c.readTimeoutMs }),
    ], required: ["sql"], extra: { _ in [("examples", [["sql": "SELECT name FROM sqlite_schema WHERE type = ?", "params": ["table"], "max_rows": 100]])] })

    static let createBuild = BodyFields(name: "CreateBuild", fields: [.string("key", OpenAPI.buildKey), label], required: ["key"],
                                        extra: { _ in [("examples", [["key": "django-3f2a9c", "label": "ci-4711"]])] })

    static let checkStore = BodyFields(name: "CheckStore", fields: [
        .value("against", ["oneOf": [
            OpenAPI.object([("build", OpenAPI.buildKey)], required: ["build"]),
            OpenAPI.object([("template", OpenAPI.templateName), ("version", ["type": ["string", "null"], "minLength": 1])], required: ["template"]),
            OpenAPI.object([("store", ["type": "string", "minLength": 1])], required: ["store"]),
        ], "description": "The reference the migrated store must match: an app build, a template at a version (default \"latest\"), or a live store."]),
        .string("snapshot", ["type": ["string", "null"], "description": "The snapshot's name, as the result and its JUnit test case name it."]),
        .value("expect", ["type": ["object", "null"], "description": "The .expect.json shape: version, counts, min_counts, assert, before (on the upload as it arrived), drops, moves, deletes.",
                          "propertyNames": ["enum": .array(MigrationCheck.expectationKeys.map { .string($0) })]]),
        .boolean("data", ["type": ["boolean", "null"], "description": "false skips the check that every table and column that held data still holds it."]),
    ], required: ["against"], extra: { _ in [("examples", [["against": ["build": "django-3f2a9c"], "snapshot": "v1.sqlite",
                                                             "expect": ["before": ["SELECT count(*) = 3 FROM artists"]]]])] })
}
