import LarderCore

/// The OpenAPI 3.1 description served at `/openapi.json`, built from one
/// table of operations so it stays in step with the routes (a test checks).
///
/// The schemas state the limits the server enforces (ranges, enums, which
/// fields may be null, which combinations are refused) so that a generator
/// such as schemathesis sends nothing the document allows and the server
/// refuses, or the other way round. Limits that come from the configuration
/// (`--query-row-limit`, `--query-timeout-ms`, `--wait-timeout-max-ms`) are
/// taken from the `Configuration` the document is built for.
enum OpenAPI {
    /// One query parameter: its name and its JSON schema.
    struct Parameter {
        let name: String
        let schema: JSONValue
        var description: String? = nil
    }

    struct Operation {
        let method: String
        let path: String
        let summary: String
        let success: Int
        /// Error statuses this operation can answer besides those every
        /// operation can (see `commonErrors`).
        let errors: [Int]
        /// More success statuses, with the same answer (`POST /builds`: 201, 202 and 200).
        var moreSuccesses: [Int] = []
        /// The component schema of the request body.
        var body: String? = nil
        /// The media type of the request body.
        var bodyType = "application/json"
        /// Whether a request without a body is refused (400).
        var bodyRequired = false
        var query: [Parameter] = []
        var contentType = "application/json"
        /// The component schema of a JSON success answer.
        var answer: String? = nil
        var description: String? = nil
    }

    /// Statuses any operation can answer: a foreign `Origin` or `Host` (403
    /// `forbidden`), a bug (500), shutting down (503); and, on every route but
    /// `GET /health` and signing in and out, a missing token (401).
    static func commonErrors(_ op: Operation) -> [Int] {
        (Router.isOpen(op.path, method: op.method.uppercased()) ? [] : [401]) + [403, 500, 503]
    }

    static let ttl: JSONValue = ["type": ["integer", "null"], "minimum": .int(Int64(StoreRecord.ttlSeconds.lowerBound)),
                                 "maximum": .int(Int64(StoreRecord.ttlSeconds.upperBound)),
                                 "description": "Seconds until the store expires (1 s to 365 days); null or absent: the server's default."]

    static func operations(_ c: Configuration) -> [Operation] {
        [
            Operation(method: "get", path: "/health", summary: "Liveness and versions", success: 200, errors: [], answer: "Health"),
            Operation(method: "get", path: "/metrics", summary: "Prometheus metrics", success: 200, errors: [], contentType: "text/plain"),
            Operation(method: "get", path: "/openapi.json", summary: "This document", success: 200, errors: []),
            Operation(method: "get", path: "/", summary: "HTML dashboard", success: 200, errors: [400],
                      query: [Parameter(name: "cursor", schema: ["type": "string", "pattern": "^\\+?0*[1-9][0-9]{0,17}$"],
                                        description: "The page of older stores that the dashboard's \"older\" link names.")],
                      contentType: "text/html",
                      description: "With a token set and neither the token nor the sign-in cookie given, 401 with an HTML sign-in form."),
            Operation(method: "post", path: "/sign-in", summary: "Sign a browser in to the dashboard (an HTML form)", success: 303,
                      errors: [400, 401, 413, 415], body: "SignIn", bodyType: "application/x-www-form-urlencoded", bodyRequired: true,
                      contentType: "text/html",
                      description: "The right token answers 303 to `/` with the session cookie `larder_session_<port>` (HttpOnly, SameSite=Strict; named for the port browsers reach, so two servers on one host keep their own); "
                          + "a wrong one 401 with the sign-in form again. Without a token set, 303 to `/`. Needs no token."),
            Operation(method: "post", path: "/sign-out", summary: "Sign a browser out (clears the session cookie)", success: 303, errors: [400],
                      contentType: "text/html", description: "303 to `/`. Takes no body; needs no token."),
            Operation(method: "get", path: "/templates", summary: "Every template of the fixtures directory", success: 200, errors: [], answer: "TemplateList"),
            Operation(method: "get", path: "/templates/{name}", summary: "One template with its migrations", success: 200, errors: [404], answer: "Template"),
            Operation(method: "get", path: "/stores", summary: "Live stores, newest first", success: 200, errors: [400],
                      query: [
                          Parameter(name: "label", schema: string, description: "Only stores with this label."),
                          Parameter(name: "label_prefix", schema: string, description: "Only stores whose label starts with this (one CI run's, say)."),
                          Parameter(name: "template", schema: string, description: "Only stores made from this template."),
                          Parameter(name: "limit", schema: ["type": "integer", "minimum": 1, "maximum": 10_000, "default": 100],
                                    description: "Stores per page."),
                          Parameter(name: "cursor", schema: ["type": "string", "pattern": "^\\+?0*[1-9][0-9]{0,17}$"],
                                    description: "The `next_cursor` of the page before."),
                      ], answer: "StoreList"),
            Operation(method: "post", path: "/stores", summary: "Create a store (JSON body, or a raw upload as application/vnd.sqlite3)", success: 201,
                      errors: [400, 404, 408, 409, 413, 415, 422, 429, 507], body: "CreateStore", answer: "Store",
                      description: "An empty body gives an empty store. A raw upload (`Content-Type: application/vnd.sqlite3`, a SQLite "
                          + "database file as the body) takes the query parameters `template`, `version`, `label` and `ttl_seconds` "
                          + "(\(StoreRecord.ttlSeconds.lowerBound) to \(StoreRecord.ttlSeconds.upperBound)), which do what the JSON fields do (a label is at most 256 bytes); a JSON body takes no query parameters. An upload "
                          + "that is not a SQLite database is a 400. `from` forks a live store (404 `store_not_found` when there is none): "
                          + "a consistent copy of its committed state, then `fixtures` (named fixtures of its template). `build` copies an "
                          + "app-built template (404 `unknown_build` when there is none); while it is building, the request waits up to "
                          + "`timeout_ms`, then 408."),
            Operation(method: "delete", path: "/stores", summary: "Remove every store with a label, or a label prefix (kept ones too)", success: 200,
                      errors: [400],
                      query: [
                          Parameter(name: "label", schema: ["type": "string", "minLength": 1], description: "Stores with exactly this label."),
                          Parameter(name: "label_prefix", schema: ["type": "string", "minLength": 1], description: "Stores whose label starts with this."),
                      ], answer: "Deleted", description: "`label`, `label_prefix`, or both (a store matching either goes); neither is a 400."),
            Operation(method: "get", path: "/stores/{id}", summary: "One store", success: 200, errors: [404, 409], answer: "Store"),
            Operation(method: "patch", path: "/stores/{id}", summary: "Keep, relabel or extend a store", success: 200, errors: [400, 404, 409, 413, 415],
                      body: "PatchStore", answer: "Store"),
            Operation(method: "delete", path: "/stores/{id}", summary: "Remove a store and its files", success: 204, errors: [404, 409]),
            Operation(method: "post", path: "/stores/{id}/reset", summary: "Back to the creation state, in place", success: 200,
                      errors: [400, 404, 408, 409, 413, 415, 422, 507], answer: "Store",
                      description: "The contents the store was created with (its template entry and creation fixtures, its fork or its upload) "
                          + "are copied into the live file through SQLite: same `path`, same file, so connections the test holds stay valid "
                          + "and see the reset state at their next transaction. A write transaction the test holds is a 409 with Retry-After. "
                          + "A live file its test broke (removed, written over, another page size) is made again from the base instead; "
                          + "a base that is not a database is 422. Takes no body, or an empty JSON object."),
            Operation(method: "post", path: "/stores/{id}/fixtures", summary: "Load fixtures, SQL or rows, all or nothing", success: 200,
                      errors: [400, 404, 408, 409, 413, 415, 422, 429, 507], body: "LoadFixtures", bodyRequired: true, answer: "Loaded",
                      description: "Named fixtures need a store made from a template (400 otherwise). SQL that reaches outside the store is a 403 `forbidden_sql`."),
            Operation(method: "post", path: "/stores/{id}/migrate", summary: "Migrate to a version", success: 200,
                      errors: [400, 404, 408, 409, 413, 415, 422, 429, 507], body: "Migrate", answer: "Migrated",
                      description: "Needs a store made from a template (400 otherwise)."),
            Operation(method: "get", path: "/stores/{id}/migrations", summary: "Applied and pending migrations", success: 200, errors: [400, 404, 409, 422],
                      answer: "Migrations", description: "Needs a store made from a template (400 otherwise)."),
            Operation(method: "get", path: "/stores/{id}/counts", summary: "Row counts; with wait=, a long poll", success: 200, errors: [400, 404, 408, 409, 422],
                      query: [
                          Parameter(name: "tables", schema: string,
                                    description: "Comma-separated table names (a table the store does not have is a 400)."),
                          Parameter(name: "wait", schema: ["type": "string", "pattern": .string("^" + condition + "(," + condition + ")*$"), "examples": ["artworks>=3"]],
                                    description: "Comma-separated conditions `TABLE OP N`, OP one of >= > = <= <; the answer waits until all hold, or 408."),
                          Parameter(name: "timeout_ms", schema: ["type": "integer", "minimum": 0, "maximum": .int(Int64(c.waitTimeoutMaxMs))],
                                    description: "How long `wait` waits (default 30000, capped by --wait-timeout-max-ms); only with `wait` (400 otherwise)."),
                      ], answer: "Counts"),
            Operation(method: "get", path: "/stores/{id}/schema", summary: "Tables, columns, indexes, foreign keys, views, triggers", success: 200,
                      errors: [400, 404, 409, 422], answer: "Schema"),
            Operation(method: "get", path: "/stores/{id}/page", summary: "HTML page of one store: metadata, what its test changed, its tables",
                      success: 200, errors: [400, 404, 408, 409, 422],
                      query: [
                          Parameter(name: "table", schema: ["type": "string", "minLength": 1],
                                    description: "The table whose rows `offset` pages (one the store does not have is a 400)."),
                          Parameter(name: "offset", schema: ["type": "integer", "minimum": 0, "maximum": 2_147_483_647],
                                    description: "The first row shown of `table`."),
                      ],
                      contentType: "text/html"),
            Operation(method: "get", path: "/stores/{id}/diff", summary: "What the test changed since the store was created", success: 200,
                      errors: [400, 404, 408, 409, 422],
                      query: [
                          Parameter(name: "limit", schema: ["type": "integer", "minimum": 0, "maximum": 10_000, "default": 100],
                                    description: "Rows listed per table; the counts are always whole."),
                          Parameter(name: "tables", schema: ["type": "string", "pattern": "[^, ]"],
                                    description: "Comma-separated table names (one in neither the store nor its base is a 400)."),
                      ], answer: "Diff",
                      description: "Against the store's base (its template entry, fork or upload as created), in one consistent read. "
                          + "Rows are matched by the declared primary key, the rowid where none is declared, the key of a WITHOUT ROWID table."),
            Operation(method: "post", path: "/stores/{id}/query", summary: "One sandboxed SQL statement", success: 200,
                      errors: [400, 404, 408, 409, 413, 415, 422, 429, 507], body: "Query", bodyRequired: true, answer: "QueryResult",
                      description: "SQL that reaches outside the store (ATTACH, VACUUM INTO, load_extension, unsafe PRAGMA, transaction control) is a 403 `forbidden_sql`."),
            Operation(method: "get", path: "/stores/{id}/artifact", summary: "The store as a streamed zip with a manifest", success: 200,
                      errors: [400, 404, 409, 422, 507],
                      query: [Parameter(name: "compression", schema: ["type": "string", "enum": ["deflate", "store"], "default": "deflate"])],
                      contentType: "application/zip"),
            Operation(method: "get", path: "/stores/{id}/database", summary: "A consistent snapshot of the database", success: 200, errors: [400, 404, 409, 422, 507],
                      contentType: "application/vnd.sqlite3"),
            Operation(method: "get", path: "/builds", summary: "App-built templates, building and ready", success: 200, errors: [400],
                      answer: "BuildList"),
            Operation(method: "post", path: "/builds", summary: "Build an app-built template, or hear that it is building or ready", success: 201,
                      errors: [400, 413, 415, 429, 507], moreSuccesses: [200, 202], body: "CreateBuild", bodyRequired: true, answer: "Build",
                      description: "201: this caller builds: it opens `path` with its own driver, runs its migrator and fixtures, closes it, "
                          + "then finishes the build. 202: another caller is building it. 200: it is ready."),
            Operation(method: "get", path: "/builds/{key}", summary: "One app-built template; with wait=ready, a long poll", success: 200,
                      errors: [400, 404, 408],
                      query: [
                          Parameter(name: "wait", schema: ["type": "string", "enum": ["ready"]],
                                    description: "Answer once the build is no longer building: ready (200), discarded (404), or 408 after `timeout_ms`."),
                          Parameter(name: "timeout_ms", schema: ["type": "integer", "minimum": 0, "maximum": .int(Int64(c.waitTimeoutMaxMs))],
                                    description: "How long `wait` waits (default 30000); only with `wait` (400 otherwise)."),
                      ], answer: "Build"),
            Operation(method: "delete", path: "/builds/{key}", summary: "Discard an app-built template (its migrator failed)", success: 204,
                      errors: [400, 404, 409], description: "The next POST /builds of the key builds it again. 409 while it is being finished."),
            Operation(method: "post", path: "/builds/{key}/finish", summary: "Check a build and make it a ready, immutable template", success: 200,
                      errors: [400, 404, 408, 409, 413, 415, 422, 429, 507], answer: "Build",
                      description: "`integrity_check`, no connection writing it (409 with Retry-After while one does), then a copy in WAL mode, "
                          + "checkpointed and read-only, into the template cache (429 when it is larger than the cache's whole budget). "
                          + "A failure leaves the build building. A ready build answers "
                          + "as it is. Takes no body, or an empty JSON object."),
            Operation(method: "get", path: "/checks/migrations", summary: "Migration fixture health checks", success: 200, errors: [400, 404, 422],
                      query: [
                          Parameter(name: "template", schema: templateName, description: "Check only this template."),
                          Parameter(name: "round_trip", schema: ["type": "boolean", "default": true],
                                    description: "false skips the round trips (up, down to nothing, up again) of templates with down migrations."),
                          Parameter(name: "data", schema: ["type": "boolean", "default": true],
                                    description: "false skips the check that every table and column of a snapshot that held data still holds it."),
                          Parameter(name: "format", schema: ["type": "string", "enum": ["json", "junit"], "default": "json"],
                                    description: "`junit` answers JUnit XML (application/xml)."),
                      ], answer: "CheckReport",
                      description: "200 when every check passes, 422 (with the same report) when any fails."),
        ]
    }

    /// The table the route test compares with the router (default limits).
    static let operations = operations(Configuration())

    /// One count condition of `wait`: a table, an operator, a whole number.
    static let condition = " *[A-Za-z_][A-Za-z0-9_]* *(>=|<=|>|<|==?) *-?[0-9]{1,18} *"

    static func object(_ properties: [(String, JSONValue)], required: [String] = [], extra: [(String, JSONValue)] = []) -> JSONValue {
        var members: [(String, JSONValue)] = [("type", "object"), ("additionalProperties", false), ("properties", .object(properties))]
        if !required.isEmpty { members.append(("required", JSONValue(required))) }
        return .object(members + extra)
    }

    /// A response object: the listed members are required, more may come.
    static func answer(_ properties: [(String, JSONValue)]) -> JSONValue {
        ["type": "object", "required": JSONValue(properties.map(\.0)), "properties": .object(properties)]
    }

    static let string: JSONValue = ["type": "string"]
    /// A row as an object of column values; a blob is {"base64": "..."}.
    static let rowObject: JSONValue = ["type": "object", "additionalProperties": ["oneOf": [
        ["type": ["string", "number", "null"]],
        answer([("base64", ["type": "string", "contentEncoding": "base64"])]),
    ]]]
    /// SQL: any text but a NUL character (SQLite would stop reading there; a 400).
    static let noNUL: JSONValue = "^[^\\u0000]*$"
    static let sql: JSONValue = ["type": "string", "pattern": noNUL]
    static let nullableString: JSONValue = ["type": ["string", "null"]]
    /// At most 256 bytes of UTF-8: 256 characters at most, fewer where they take more than a byte.
    static let label: JSONValue = ["type": ["string", "null"], "maxLength": 256]
    static let boolean: JSONValue = ["type": "boolean"]
    static let strings: JSONValue = ["type": "array", "items": ["type": "string"]]
    static let time: JSONValue = ["type": "string", "format": "date-time"]
    static let counts: JSONValue = ["type": "object", "additionalProperties": ["type": "integer", "minimum": 0]]
    /// What the catalog takes as a template name (no path tricks).
    static let templatePattern: JSONValue = "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$"
    static let templateName: JSONValue = ["type": "string", "pattern": templatePattern]
    static let storeID: JSONValue = ["type": "string", "pattern": "^[A-Za-z0-9_-]+$"]
    static let buildKey: JSONValue = ["type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"]
    static let nonNegative: JSONValue = ["type": "integer", "minimum": 0]
    /// A view or a trigger: its name, its table and its SQL.
    static let schemaObject = answer([("name", string), ("table", string), ("sql", nullableString)])
    static func ref(_ name: String) -> JSONValue { ["$ref": .string("#/components/schemas/\(name)")] }

    static func schemas(_ c: Configuration) -> [(String, JSONValue)] {
        let template: JSONValue = ["type": ["string", "null"], "pattern": templatePattern]
        let isString: (String) -> JSONValue = { ["required": [.string($0)], "properties": [$0: ["type": "string"]]] }
        let isNull: (String) -> JSONValue = { ["required": [.string($0)], "properties": [$0: ["type": "null"]]] }
        return [
            ("Error", ["type": "object", "required": ["error"], "properties": ["error": ["type": "object", "required": ["code", "message", "details"],
                       "properties": ["code": ["type": "string", "enum": .array(LarderError.Code.allCases.map { .string($0.rawValue) })],
                                      "message": string, "details": ["type": "object"]]]]]),
            ("CreateStore", object([
                ("template", template), ("version", ["type": ["string", "null"], "description": "\"latest\" (the default) or a version; null keeps a snapshot as it is."]),
                ("snapshot", nullableString), ("fixtures", ["type": ["array", "null"], "items": ["type": "string"]]),
                ("label", label), ("ttl_seconds", ttl),
                ("from", ["type": ["string", "null"], "description": "The id of a live store to fork; not with `template`, `snapshot` or `version`."]),
                ("build", ["type": ["string", "null"], "pattern": "^[A-Za-z0-9._-]{1,128}$",
                           "description": "The key of an app-built template to copy; not with `template` or `from`."]),
                ("timeout_ms", ["type": ["integer", "null"], "minimum": 0, "maximum": .int(Int64(c.waitTimeoutMaxMs)),
                                "description": "How long to wait while the build is building (default 30000); only with `build`."]),
            ], extra: [("allOf", [
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
            ]), ("examples", [[:], ["template": "gallery", "fixtures": ["artists", "artworks"], "label": "test_album_sync", "ttl_seconds": 600]])])),
            ("SignIn", object([("token", ["type": "string", "minLength": 1, "maxLength": 1024])], required: ["token"])),
            ("PatchStore", object([("keep", ["type": ["boolean", "null"]]), ("ttl_seconds", ttl), ("label", label)],
                                 extra: [("examples", [["keep": true, "ttl_seconds": 86400]])])),
            ("LoadFixtures", object([
                ("fixtures", strings), ("sql", sql),
                ("rows", ["type": "object", "description": "Table name to rows, each row a non-empty object of columns.",
                          "additionalProperties": ["type": "array", "items": ["type": "object", "minProperties": 1]]]),
            ], extra: [("minProperties", 1), ("maxProperties", 1), ("description", "Exactly one of `fixtures`, `sql` and `rows`."),
                      ("examples", [["sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"], ["rows": ["notes": [["body": "hello"]]]]])])),
            ("Migrate", object([("to", ["type": ["string", "null"], "description": "\"latest\" (the default) or a version."])],
                              extra: [("examples", [["to": "latest"]])])),
            ("Query", object([
                ("sql", ["type": "string", "minLength": 1, "pattern": noNUL,
                         "description": "One SQL statement (blanks and comments alone are a 400, as are two statements, or a NUL character)."]),
                ("params", ["type": ["array", "object", "null"], "description": "Values for `?` (an array) or for named parameters (an object)."]),
                ("max_rows", ["type": ["integer", "null"], "minimum": 1, "maximum": .int(Int64(c.queryRowLimit))]),
                ("timeout_ms", ["type": ["integer", "null"], "minimum": 1, "maximum": .int(Int64(c.queryTimeoutMs))]),
            ], required: ["sql"], extra: [("examples", [["sql": "SELECT name FROM sqlite_schema WHERE type = ?", "params": ["table"], "max_rows": 100]])])),
            ("Health", answer([("status", ["type": "string", "enum": ["ok"]]), ("version", string), ("sqlite_version", string),
                               ("stores", nonNegative), ("started_at", time)])),
            ("Store", StoreAnswer.schema),
            ("StoreList", answer([("stores", ["type": "array", "items": ref("Store")]), ("next_cursor", nullableString)])),
            ("TemplateSummary", TemplateAnswer.summarySchema),
            ("TemplateList", answer([("templates", ["type": "array", "items": ref("TemplateSummary")])])),
            ("Template", TemplateAnswer.schema),
            ("Counts", answer([("counts", counts)])),
            ("Schema", answer([
                ("tables", ["type": "array", "items": answer([
                    ("name", string),
                    ("columns", ["type": "array", "items": answer([("name", string), ("type", string), ("notnull", boolean),
                                                                     ("default", nullableString), ("pk", nonNegative)])]),
                    ("indexes", ["type": "array", "items": answer([("name", string), ("unique", boolean),
                                                                     ("origin", ["type": "string", "enum": ["c", "u", "pk"]]), ("partial", boolean),
                                                                     ("columns", ["type": "array", "items": nullableString])])]),
                    ("foreign_keys", ["type": "array", "items": answer([("columns", ["type": "array", "items": nullableString]), ("table", string),
                                                                          ("to", ["type": "array", "items": nullableString]),
                                                                          ("on_update", string), ("on_delete", string)])]),
                ])]),
                ("views", ["type": "array", "items": schemaObject]), ("triggers", ["type": "array", "items": schemaObject]),
            ])),
            ("QueryResult", answer([
                ("columns", strings),
                ("rows", ["type": "array", "items": ["type": "array", "items": ["oneOf": [
                    ["type": ["string", "number", "null"]],
                    answer([("base64", ["type": "string", "contentEncoding": "base64"])]),
                ]]], "description": "Rows as arrays in column order; a blob is {\"base64\": \"...\"}."]),
                ("changes", nonNegative), ("truncated", boolean),
            ])),
            ("Deleted", answer([("deleted", nonNegative)])),
            ("Diff", answer([
                ("base", string),
                ("schema", answer(["added", "removed", "changed"].map { kind in
                    (kind, ["type": "array", "items": [
                        "type": "object", "required": ["type", "name"],
                        "properties": ["type": ["type": "string", "enum": ["table", "column", "index", "foreign_keys", "view", "trigger"]],
                                       "name": string, "table": string, "old": [:], "new": [:]],
                    ]] as JSONValue)
                })),
                ("tables", ["type": "object", "additionalProperties": answer([
                    ("inserted", nonNegative), ("updated", nonNegative), ("deleted", nonNegative), ("truncated", boolean),
                    ("rows", ["type": "array", "items": answer([
                        ("op", ["type": "string", "enum": ["insert", "update", "delete"]]),
                        ("key", rowObject), ("old", ["oneOf": [rowObject, ["type": "null"]]]), ("new", ["oneOf": [rowObject, ["type": "null"]]]),
                    ])]),
                ])]),
            ])),
            ("Loaded", answer([("loaded", strings), ("counts", counts)])),
            ("Migrated", answer([("from", nullableString), ("to", nullableString), ("applied", ["type": "array", "items": answer([
                ("version", string), ("name", string), ("ms", ["type": "number", "minimum": 0])])])])),
            ("Migrations", answer([("version", nullableString), ("dirty", boolean), ("migrations", ["type": "array", "items": answer([
                ("version", string), ("name", string), ("state", ["type": "string", "enum": ["applied", "pending"]])])])])),
            ("CreateBuild", object([("key", buildKey), ("label", label)], required: ["key"],
                                   extra: [("examples", [["key": "django-3f2a9c", "label": "ci-4711"]])])),
            ("Build", BuildAnswer.schema),
            ("BuildList", answer([("builds", ["type": "array", "items": ref("Build")])])),
            ("CheckResult", answer([
                ("template", string), ("kind", ["type": "string", "enum": ["snapshot", "round_trip"]]), ("snapshot", nullableString), ("from_version", nullableString), ("to_version", nullableString),
                ("passed", boolean), ("ms", ["type": "number", "minimum": 0]), ("failures", strings), ("notes", strings),
            ])),
            ("CheckReport", answer([("passed", nonNegative), ("failed", nonNegative), ("results", ["type": "array", "items": ref("CheckResult")])])),
        ]
    }

    static func operationID(_ op: Operation) -> String {
        op.method + op.path.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "{", with: "")
            .replacingOccurrences(of: "}", with: "").replacingOccurrences(of: ".", with: "_")
    }

    static func responses(_ op: Operation) -> [(String, JSONValue)] {
        let error: JSONValue = ["description": "Error", "content": ["application/json": ["schema": ref("Error")]]]
        let schema: JSONValue = op.contentType == "application/json" ? (op.answer.map(ref) ?? ["type": "object"])
            : (op.contentType.hasPrefix("text/") ? ["type": "string"] : ["type": "string", "format": "binary"])
        var success: [(String, JSONValue)] = [(op.contentType, ["schema": schema])]
        if op.path == "/checks/migrations" { success.append(("application/xml", ["schema": ["type": "string"]])) }
        let deleted: JSONValue = ["description": "Deleted"], done: JSONValue = ["description": "Success", "content": .object(success)]
        let seeOther: JSONValue = ["description": "See Other: to the dashboard", "headers": ["Location": ["schema": string]]]
        var responses: [(String, JSONValue)] = [(String(op.success), op.success == 204 ? deleted : op.success == 303 ? seeOther : done)]
        responses += op.moreSuccesses.map { (String($0), done) }
        for code in (op.errors + commonErrors(op)).sorted() {
            // A failed migration check answers the report, not an error.
            let failedCheck = op.path == "/checks/migrations" && code == 422
            // A browser without the token gets the sign-in form.
            let signIn = code == 401 && (op.path == "/" || op.path == "/sign-in")
            responses.append((String(code), failedCheck ? ["description": "Some checks failed", "content": .object(success)]
                : signIn ? ["description": "The sign-in form", "content": ["text/html": ["schema": ["type": "string"]]]] : error))
        }
        return responses
    }

    /// The document for a server with this configuration.
    static func document(for configuration: Configuration) -> JSONValue {
        var paths: [(String, [(String, JSONValue)])] = []
        for op in operations(configuration) {
            var parameters: [JSONValue] = []
            for segment in op.path.split(separator: "/") where segment.hasPrefix("{") {
                let name = String(segment.dropFirst().dropLast())
                parameters.append(["name": .string(name), "in": "path", "required": true, "schema": name == "id" ? storeID : name == "key" ? buildKey : templateName])
            }
            for p in op.query {
                var parameter: [(String, JSONValue)] = [("name", .string(p.name)), ("in", "query"), ("required", false), ("schema", p.schema)]
                if let d = p.description { parameter.append(("description", .string(d))) }
                parameters.append(.object(parameter))
            }
            var operation: [(String, JSONValue)] = [("summary", .string(op.summary)), ("operationId", .string(operationID(op)))]
            if let d = op.description { operation.append(("description", .string(d))) }
            operation.append(("responses", .object(responses(op))))
            if !parameters.isEmpty { operation.append(("parameters", .array(parameters))) }
            if let body = op.body {
                var content: [(String, JSONValue)] = [(op.bodyType, ["schema": ref(body)])]
                if op.path == "/stores" { content.append(("application/vnd.sqlite3", ["schema": ["type": "string", "format": "binary"]])) }
                operation.append(("requestBody", ["required": .bool(op.bodyRequired), "content": .object(content)]))
            }
            if let i = paths.firstIndex(where: { $0.0 == op.path }) { paths[i].1.append((op.method, .object(operation))) } else { paths.append((op.path, [(op.method, .object(operation))])) }
        }
        return [
            "openapi": "3.1.0",
            "info": ["title": "Larder", "version": .string(LarderVersion.current),
                     "description": "Isolated throwaway SQLite stores for test suites, over HTTP."],
            "paths": .object(paths.map { ($0.0, .object($0.1)) }),
            "components": ["schemas": .object(schemas(configuration)), "securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]]],
        ]
    }

    /// The document for the default configuration.
    static let document = document(for: Configuration())
}
