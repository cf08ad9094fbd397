// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// What `POST /stores` asks for: one of the five ways to make a store, read
/// and checked from the body (or an upload's query) before anything is made.
enum StoreCreation {
    /// A SQLite file as the body; a large one arrives spooled to a file.
    case upload(Provisioner.Upload, Provisioner.UploadFormat, spooled: SpooledBody?, template: String?, version: String?)
    /// A copy of an app-built template, waiting up to `timeoutMs` while it builds.
    case build(key: String, timeoutMs: Int?)
    /// A copy of a live store, then named fixtures of its template.
    case fork(source: String, fixtures: [String]?)
    case empty
    /// A template at a version, with a snapshot and fixtures.
    case template(Provisioner.Request)

    /// What a raw upload's query may say (a JSON body takes no query).
    static let uploadQuery: Set<String> = ["template", "version", "label", "ttl_seconds"]

    /// The way asked for, and the label and lifetime every way takes.
    static func read(_ request: Request, _ configuration: Configuration) throws -> (StoreCreation, label: String?, ttlSeconds: Int?) {
        if let format = uploadFormat(request.mediaType) { return try readUpload(request, format) }
        try request.checkQuery(allowed: []) // a JSON body says it all
        let body = try JSONBody(request, RequestBody.createStore, configuration)
        let label = try body.string("label")
        let ttl = try body.int("ttl_seconds")
        var wanted = Provisioner.Request()
        wanted.template = try body.string("template")
        wanted.fixtures = try body.stringArray("fixtures")
        wanted.snapshot = try body.string("snapshot")
        if body.has("version") { wanted.version = try body.string("version") }
        let timeout = try body.int("timeout_ms")
        let source = try body.string("from")
        if let key = try body.string("build") {
            guard wanted.template == nil, wanted.snapshot == nil, wanted.fixtures == nil, !body.has("version"), source == nil else {
                throw LarderError.badRequest("'build' copies an app-built template as it is: not with 'template', 'snapshot', 'version', 'fixtures' or 'from'")
            }
            return (.build(key: key, timeoutMs: timeout), label, ttl)
        }
        if timeout != nil { throw LarderError.badRequest("'timeout_ms' goes with 'build' (how long to wait while it builds)") }
        if let source {
            guard wanted.template == nil, wanted.snapshot == nil, !body.has("version") else {
                throw LarderError.badRequest("'from' forks a live store as it is: not with 'template', 'snapshot' or 'version'")
            }
            return (.fork(source: source, fixtures: wanted.fixtures), label, ttl)
        }
        guard wanted.template != nil else {
            if wanted.fixtures != nil || wanted.snapshot != nil || body.has("version") {
                throw LarderError.badRequest("'version', 'snapshot' and 'fixtures' need a 'template'")
            }
            return (.empty, label, ttl)
        }
        return (.template(wanted), label, ttl)
    }

    /// What a raw upload's media type says it is: the database, or a zip of it with its -wal.
    static func uploadFormat(_ mediaType: String?) -> Provisioner.UploadFormat? {
        switch mediaType {
        case "application/vnd.sqlite3": .database
        case "application/zip": .zip
        default: nil
        }
    }

    private static func readUpload(_ request: Request, _ format: Provisioner.UploadFormat) throws -> (StoreCreation, label: String?, ttlSeconds: Int?) {
        let template = request.queryValue("template")
        // As in the JSON body: a template means its latest version unless
        // told otherwise; an empty `version=` keeps the upload as it is.
        let version = request.queryValue("version").map { $0.isEmpty ? nil : $0 } ?? (template == nil ? nil : "latest")
        let ttl = try request.queryInt("ttl_seconds", in: StoreRecord.ttlSeconds)
        let (upload, spooled) = rawBody(request)
        return (.upload(upload, format, spooled: spooled, template: template, version: version), request.queryValue("label"), ttl)
    }

    /// A raw body as an upload: in memory, or the file it was spooled to
    /// (which the caller keeps alive until the store has it).
    static func rawBody(_ request: Request) -> (Provisioner.Upload, spooled: SpooledBody?) {
        let spooled = request.bodyFile
        return (spooled.map { .file(path: $0.path, size: $0.size) } ?? .bytes(request.body), spooled)
    }
}
