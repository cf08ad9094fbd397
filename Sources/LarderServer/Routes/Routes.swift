// SPDX-License-Identifier: Apache-2.0
import LarderCore

/// The route table: every operation of the contract, its handler and what
/// the OpenAPI document says of it. The router routes by it and checks
/// query names and the token by it; `OpenAPI.document` is assembled from it
/// and from the objects it names, so the two cannot drift apart.
///
/// Limits that come from the configuration (`--query-row-limit`,
/// `--read-timeout-ms`, `--wait-timeout-max-ms`) are those of `c`.
enum Routes {
    static func table(_ c: Configuration) -> [Operation] {
        let string = OpenAPI.string
        let cursor: JSONValue = ["type": "string", "pattern": "^\\+?0*[1-9][0-9]{0,17}$"]
        let waitTimeout: JSONValue = ["type": "integer", "minimum": 0, "maximum": .int(Int64(c.waitTimeoutMaxMs))]
        let changes = [404, 408, 409, 413, 415, 422, 429, 507]
        return [
            Operation(method: "GET", path: "/health", handler: ServiceRoutes.health, summary: "Liveness and versions", open: true,
                      answer: HealthAnswer.object),
            Operation(method: "GET", path: "/metrics", handler: ServiceRoutes.metrics, summary: "Prometheus metrics", contentType: "text/plain"),
            Operation(method: "GET", path: "/openapi.json", handler: ServiceRoutes.openAPI, summary: "This document"),
            Operation(method: "GET", path: "/", handler: Dashboard.show, summary: "HTML dashboard", lane: .workers(.none), signInForm: true,
                      query: [Parameter(name: "cursor", schema: cursor, description: "The page of older stores that the dashboard's \"older\" link names."),
                              Parameter(name: "label_prefix", schema: OpenAPI.string, description: "Only stores whose label starts so (one CI run's: `RUN/`)."),
                              Parameter(name: "template", schema: OpenAPI.string, description: "Only stores of this template.")],
                      contentType: "text/html",
                      description: "With a token set and neither the token nor the sign-in cookie given, 401 with an HTML sign-in form."),
            Operation(method: "POST", path: "/sign-in", handler: SignInRoutes.signIn, summary: "Sign a browser in to the dashboard (an HTML form)", open: true,
                      success: 303, errors: [401, 413, 415], signInForm: true, body: RequestBody.signIn,
                      bodyType: "application/x-www-form-urlencoded", bodyRequired: true, contentType: "text/html",
                      description: "The right token answers 303 to `/` with the session cookie `larder_session_<port>` (HttpOnly, SameSite=Strict; named for the port browsers reach, so two servers on one host keep their own); "
                          + "a wrong one 401 with the sign-in form again. Without a token set, 303 to `/`. Needs no token."),
            Operation(method: "POST", path: "/sign-out", handler: SignInRoutes.signOut, summary: "Sign a browser out (clears the session cookie)", open: true,
                      success: 303, contentType: "text/html", description: "303 to `/`. Takes no body; needs no token."),
            Operation(method: "GET", path: "/templates", handler: TemplateRoutes.list, summary: "Every template of the fixtures directory",
                      answer: TemplateAnswer.listObject),
            Operation(method: "GET", path: "/templates/{name}", handler: TemplateRoutes.show, summary: "One template with its migrations",
                      errors: [404, 422], answer: TemplateAnswer.object),
            Operation(method: "GET", path: "/stores", handler: StoreRoutes.list, summary: "Live stores, newest first", lane: .workers(.none),
                      query: [
                          Parameter(name: "label", schema: string, description: "Only stores with this label."),
                          Parameter(name: "label_prefix", schema: string, description: "Only stores whose label starts with this (one CI run's, say)."),
                          Parameter(name: "template", schema: string, description: "Only stores made from this template."),
                          Parameter(name: "limit", schema: ["type": "integer", "minimum": 1, "maximum": 10_000, "default": 100],
                                    description: "Stores per page."),
                          Parameter(name: "cursor", schema: cursor, description: "The `next_cursor` of the page before."),
                      ], answer: StoreAnswer.listObject),
            Operation(method: "POST", path: "/stores", handler: StoreRoutes.create,
                      summary: "Create a store (JSON body, or a raw upload as application/vnd.sqlite3)", lane: .workers(.none), success: 201,
                      errors: [404, 408, 409, 413, 415, 422, 429, 507], body: RequestBody.createStore,
                      rawBodyTypes: ["application/vnd.sqlite3", "application/zip"], undocumentedQuery: StoreCreation.uploadQuery, answer: StoreAnswer.object,
                      description: "An empty body gives an empty store. A raw upload (`Content-Type: application/vnd.sqlite3`, a SQLite "
                          + "database file as the body, or `application/zip`, a zip of the database with its `-wal`, whose last writes are applied) takes the query parameters `template`, `version`, `label` and `ttl_seconds` "
                          + "(\(StoreRecord.ttlSeconds.lowerBound) to \(StoreRecord.ttlSeconds.upperBound)), which do what the JSON fields do (a label is at most 256 bytes); a JSON body takes no query parameters. An upload "
                          + "that is not a SQLite database is a 400. `from` forks a live store (404 `store_not_found` when there is none): "
                          + "a consistent copy of its committed state, then `fixtures` (named fixtures of its template). `build` copies an "
                          + "app-built template (404 `unknown_build` when there is none); while it is building, the request waits up to "
                          + "`timeout_ms`, then 408."),
            Operation(method: "DELETE", path: "/stores", handler: StoreRoutes.deleteAll,
                      summary: "Remove every store with a label, or a label prefix (kept ones too)", lane: .workers(.none),
                      query: [
                          Parameter(name: "label", schema: ["type": "string", "minLength": 1], description: "Stores with exactly this label."),
                          Parameter(name: "label_prefix", schema: ["type": "string", "minLength": 1], description: "Stores whose label starts with this."),
                      ], answer: StoreAnswer.deletedObject, description: "`label`, `label_prefix`, or both (a store matching either goes); neither is a 400."),
            Operation(method: "GET", path: "/stores/{id}", handler: StoreRoutes.show, summary: "One store", lane: .workers(.store), errors: [404, 409], answer: StoreAnswer.object),
            Operation(method: "PATCH", path: "/stores/{id}", handler: StoreRoutes.patch, summary: "Keep, relabel or extend a store", lane: .workers(.store),
                      errors: [404, 409, 413, 415], body: RequestBody.patchStore, answer: StoreAnswer.object),
            Operation(method: "DELETE", path: "/stores/{id}", handler: StoreRoutes.delete, summary: "Remove a store and its files", lane: .workers(.store), success: 204,
                      errors: [404]),
            Operation(method: "POST", path: "/stores/{id}/reset", handler: StoreRoutes.reset, summary: "Back to the creation state, in place", lane: .workers(.store),
                      errors: [404, 408, 409, 413, 415, 422, 507], answer: StoreAnswer.object,
                      description: "The contents the store was created with (its template entry and creation fixtures, its fork or its upload) "
                          + "are copied into the live file through SQLite: same `path`, same file, so connections the test holds stay valid "
                          + "and see the reset state at their next transaction. A write transaction the test holds is a 409 with Retry-After. "
                          + "A live file its test broke (removed, written over, another page size) is made again from the base instead; "
                          + "a base that is not a database is 422. Takes no body, or an empty JSON object."),
            Operation(method: "POST", path: "/stores/{id}/fixtures", handler: FixtureRoutes.fixtures, summary: "Load fixtures, SQL or rows, all or nothing", lane: .workers(.store),
                      errors: changes, body: RequestBody.loadFixtures, bodyRequired: true, answer: CountsAnswer.loaded,
                      description: "Named fixtures need a store made from a template (400 otherwise). SQL that reaches outside the store is a 403 `forbidden_sql`."),
            Operation(method: "POST", path: "/stores/{id}/migrate", handler: MigrationRoutes.migrate, summary: "Migrate to a version", lane: .workers(.store),
                      errors: changes, body: RequestBody.migrate, answer: MigrationAnswer.migrated,
                      description: "Needs a store made from a template (400 otherwise)."),
            Operation(method: "GET", path: "/stores/{id}/migrations", handler: MigrationRoutes.migrations, summary: "Applied and pending migrations", lane: .workers(.store),
                      errors: [404, 409, 422], answer: MigrationAnswer.status, description: "Needs a store made from a template (400 otherwise)."),
            Operation(method: "GET", path: "/stores/{id}/counts", handler: InspectRoutes.counts, summary: "Row counts; with wait=, a long poll", lane: .workers(.store),
                      errors: [404, 408, 409, 422],
                      query: [
                          Parameter(name: "tables", schema: string,
                                    description: "Comma-separated table names (a table the store does not have is a 400)."),
                          Parameter(name: "wait", schema: ["type": "string", "pattern": .string("^" + OpenAPI.condition + "(," + OpenAPI.condition + ")*$"),
                                                           "examples": ["artworks>=3"]],
                                    description: "Comma-separated conditions `TABLE OP N`, OP one of >= > = <= <; the answer waits until all hold, or 408."),
                          Parameter(name: "timeout_ms", schema: waitTimeout,
                                    description: "How long `wait` waits (default 30000, capped by --wait-timeout-max-ms); only with `wait` (400 otherwise)."),
                      ], answer: CountsAnswer.object),
            Operation(method: "GET", path: "/stores/{id}/schema", handler: InspectRoutes.schema,
                      summary: "Tables, columns, indexes, foreign keys, views, triggers", lane: .workers(.store), errors: [404, 409, 422], answer: SchemaAnswer.object),
            Operation(method: "GET", path: "/stores/{id}/page", handler: Dashboard.storePage,
                      summary: "HTML page of one store: metadata, what its test changed, its tables", lane: .workers(.store), errors: [404, 408, 409, 422],
                      signInForm: true,
                      query: [
                          Parameter(name: "table", schema: ["type": "string", "minLength": 1],
                                    description: "The table whose rows `offset` pages (one the store does not have is a 400)."),
                          Parameter(name: "offset", schema: ["type": "integer", "minimum": 0, "maximum": 2_147_483_647],
                                    description: "The first row shown of `table`."),
                      ], contentType: "text/html"),
            Operation(method: "GET", path: "/stores/{id}/diff", handler: InspectRoutes.diff, summary: "What the test changed since the store was created", lane: .workers(.store),
                      errors: [404, 408, 409, 422],
                      query: [
                          Parameter(name: "limit", schema: ["type": "integer", "minimum": 0, "maximum": 10_000, "default": 100],
                                    description: "Rows listed per table; the counts are always whole."),
                          Parameter(name: "tables", schema: ["type": "string", "pattern": "[^, ]"],
                                    description: "Comma-separated table names (one in neither the store nor its base is a 400)."),
                      ], answer: DiffAnswer.object,
                      description: "Against the store's base (its template entry, fork or upload as created), in one consistent read. "
                          + "Rows are matched by the declared primary key, the rowid where none is declared, the key of a WITHOUT ROWID table."),
            Operation(method: "POST", path: "/stores/{id}/query", handler: InspectRoutes.query, summary: "One sandboxed SQL statement", lane: .workers(.store),
                      errors: changes, body: RequestBody.query, bodyRequired: true, answer: QueryAnswer.object,
                      description: "SQL that reaches outside the store (ATTACH, VACUUM INTO, load_extension, unsafe PRAGMA, transaction control) is a 403 `forbidden_sql`."),
            Operation(method: "GET", path: "/stores/{id}/artifact", handler: ArtifactRoutes.artifact, summary: "The store as a streamed zip with a manifest",
                      errors: [404, 409, 422, 507],
                      query: [Parameter(name: "compression", schema: ["type": "string", "enum": ["deflate", "store"], "default": "deflate"]),
                              Parameter(name: "base", schema: ["type": "string", "enum": ["true", "false"], "default": "false"],
                                        description: "true: the store's creation state goes in too, as base.sqlite (what `larder open` diffs against).")],
                      contentType: "application/zip"),
            Operation(method: "GET", path: "/stores/{id}/database", handler: ArtifactRoutes.database, summary: "A consistent snapshot of the database", lane: .workers(.store),
                      errors: [404, 409, 422, 507], contentType: "application/vnd.sqlite3"),
            Operation(method: "PUT", path: "/stores/{id}/database", handler: StoreRoutes.checkIn,
                      summary: "Check in a test's copy of the store: it replaces the store's contents", lane: .workers(.store),
                      errors: [404, 408, 409, 413, 415, 422, 429, 507], rawBodyTypes: ["application/vnd.sqlite3", "application/zip"],
                      bodyRequired: true, answer: StoreAnswer.object,
                      description: "The body is the database (`application/vnd.sqlite3`), or a zip of it with its `-wal` (`application/zip`; "
                          + "the WAL's last writes are applied, a `-shm` is ignored). It is checked as an upload is, then copied into the "
                          + "live file through SQLite, in place, all or nothing; the store's creation state stays its base, so diff, reset, "
                          + "artifact and check compare what the test did against what it was given. Not a (sound) database: 400. Over "
                          + "--max-body-bytes: 413; over --max-disk-bytes: 429. A write transaction a test holds on the store: 409 with "
                          + "Retry-After. A refused body leaves the store as it was."),
            Operation(method: "GET", path: "/builds", handler: BuildRoutes.list, summary: "App-built templates, building and ready",
                      answer: BuildAnswer.listObject),
            Operation(method: "POST", path: "/builds", handler: BuildRoutes.claim,
                      summary: "Build an app-built template, or hear that it is building or ready", lane: .workers(.none), success: 201, moreSuccesses: [200, 202],
                      errors: [413, 415, 429, 507], body: RequestBody.createBuild, bodyRequired: true, answer: BuildAnswer.object,
                      description: "201: this caller builds: it opens `path` with its own driver, runs its migrator and fixtures, closes it, "
                          + "then finishes the build. 202: another caller is building it. 200: it is ready."),
            Operation(method: "GET", path: "/builds/{key}", handler: BuildRoutes.show, summary: "One app-built template; with wait=ready, a long poll",
                      errors: [404, 408],
                      query: [
                          Parameter(name: "wait", schema: ["type": "string", "enum": ["ready"]],
                                    description: "Answer once the build is no longer building: ready (200), discarded (404), or 408 after `timeout_ms`."),
                          Parameter(name: "timeout_ms", schema: waitTimeout,
                                    description: "How long `wait` waits (default 30000); only with `wait` (400 otherwise)."),
                      ], answer: BuildAnswer.object),
            Operation(method: "DELETE", path: "/builds/{key}", handler: BuildRoutes.discard, summary: "Discard an app-built template (its migrator failed)",
                      success: 204, errors: [404, 409], description: "The next POST /builds of the key builds it again. 409 while it is being finished."),
            Operation(method: "POST", path: "/builds/{key}/finish", handler: BuildRoutes.finish,
                      summary: "Check a build and make it a ready, immutable template", lane: .workers(.build), errors: changes, answer: BuildAnswer.object,
                      description: "`integrity_check`, no connection writing it (409 with Retry-After while one does), then a copy in WAL mode, "
                          + "checkpointed and read-only, into the template cache (429 when it is larger than the cache's whole budget). "
                          + "A failure leaves the build building. A ready build answers as it is. Takes no body, or an empty JSON object."),
            Operation(method: "POST", path: "/stores/{id}/check", handler: CheckRoutes.judge,
                      summary: "Judge a store the application's own migrator migrated", lane: .workers(.store), errors: [404, 408, 409, 413, 415, 422],
                      failuresAnswer: [422], body: RequestBody.checkStore, bodyRequired: true,
                      query: [Parameter(name: "format", schema: ["type": "string", "enum": ["json", "junit"], "default": "json"],
                                        description: "`junit` answers one JUnit test case (application/xml).")],
                      alternateType: "application/xml", answer: CheckAnswer.result,
                      description: "The store must be an upload (400 `not_an_upload` otherwise): its base, the old database as it arrived, is "
                          + "what `before` and the data-kept rule read. Checks `integrity_check`, no new foreign-key violations, the schema equal "
                          + "to the reference's (bookkeeping tables by structure), the data kept, and `expect`. 200 when it passes, 422 (with the "
                          + "same result) when it fails; an unknown reference is a 404, a build still building a 409."),
            Operation(method: "GET", path: "/checks/page", handler: Dashboard.checksPage,
                      summary: "HTML page of the last migration checks (what /checks/migrations answers as JSON), with a button that runs them",
                      errors: [404], signInForm: true,
                      query: [Parameter(name: "template", schema: OpenAPI.string, description: "Show (and run) only this template's.")],
                      contentType: "text/html",
                      description: "Starts no work: a GET can be made by any web page. The button posts to the same path."),
            Operation(method: "POST", path: "/checks/page", handler: Dashboard.runChecks,
                      summary: "Run the migration checks (the page's button), then 303 to the page", lane: .workers(.none),
                      success: 303, errors: [404], query: [Parameter(name: "template", schema: OpenAPI.string, description: "Check only this template.")],
                      contentType: "text/html", description: "Takes no body (a form's fields are not read)."),
            Operation(method: "GET", path: "/checks/migrations", handler: CheckRoutes.migrations, summary: "Migration fixture health checks", lane: .workers(.none),
                      errors: [404, 422], failuresAnswer: [422],
                      query: [
                          Parameter(name: "template", schema: OpenAPI.templateName, description: "Check only this template."),
                          Parameter(name: "round_trip", schema: ["type": "boolean", "default": true],
                                    description: "false skips the round trips (up, down to nothing, up again) of templates with down migrations."),
                          Parameter(name: "data", schema: ["type": "boolean", "default": true],
                                    description: "false skips the check that every table and column of a snapshot that held data still holds it."),
                          Parameter(name: "format", schema: ["type": "string", "enum": ["json", "junit"], "default": "json"],
                                    description: "`junit` answers JUnit XML (application/xml)."),
                      ], alternateType: "application/xml", answer: CheckAnswer.report,
                      description: "200 when every check passes, 422 (with the same report) when any fails."),
        ]
    }
}
