// SPDX-License-Identifier: Apache-2.0
import Foundation

/// App-built templates: a database your own migrator (GRDB's, Core Data's
/// import, or any tool) builds once per key; Larder hands out copies.
extension LarderClient {
    /// A build as the server describes it (`POST /builds`, `GET /builds/{key}`).
    public struct BuildInfo: Codable, Sendable, Hashable {
        public var key: String
        /// `"building"` or `"ready"`.
        public var state: String
        public var label: String?
        /// The file to build in: only in the answer that makes you the builder.
        public var path: String?
        public var startedAt: Date?
        /// When an unfinished build is discarded.
        public var expiresAt: Date?
        public var finishedAt: Date?
        /// The newest migration the database's own bookkeeping names.
        public var version: String?
        public var counts: [String: Int64]?
        public var sizeBytes: Int64?

        enum CodingKeys: String, CodingKey {
            case key, state, label, path, version, counts
            case startedAt = "started_at", expiresAt = "expires_at", finishedAt = "finished_at", sizeBytes = "size_bytes"
        }
    }

    /// Makes sure the app-built template `key` exists, and answers `key`
    /// for ``createStore(template:fixtures:version:snapshot:keepSnapshotVersion:label:build:from:ttlSeconds:buildTimeout:)``.
    /// The first caller of a key runs `migrate` on the file the server gives
    /// (open it with your own driver, migrate, close it), then finishes the
    /// build; when `migrate` throws, or the server refuses to finish (a
    /// connection still writing the file after a few tries, a corrupt file),
    /// the build is discarded and the error rethrown. Every other caller waits until it is ready; if its builder
    /// gave up meanwhile, the wait starts over, and this caller may build.
    ///
    ///     let key = try await larder.build(key: "grdb-" + migrationsDigest) { path in
    ///         let queue = try DatabaseQueue(path: path)
    ///         try migrator.migrate(queue)
    ///     }
    ///     let store = try await larder.createStore(build: key)
    ///
    /// The migrator needs the server's file: in remote mode (``isRemote``)
    /// this caller cannot build. When it would be the builder, it hands the
    /// build back (`DELETE /builds/{key}`) and throws ``LarderError``
    /// `remote_mode`; build the key from a client on the server's machine
    /// (local mode), or judge snapshots against a template or an uploaded
    /// store instead. Waiting for another caller's build works in either mode.
    ///
    /// - Parameter timeout: how long to wait in all for another builder;
    ///   past it, the server's 408 `timeout`.
    @discardableResult
    public func build(key: String, label: String? = nil, timeout: Duration = Defaults.buildTimeout,
                      migrate: (String) async throws -> Void) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        let mode = try resolvedMode()
        var body: [String: LarderValue] = ["key": .string(key)]
        if let label { body["label"] = .string(label) }
        while true {
            let claim: BuildInfo = try await send("POST", "/builds", body: .object(body))
            if claim.state == "ready" { return key }
            if let path = claim.path {
                if mode == .remote {
                    // Its migrator would run on the server's file, which this caller cannot open.
                    try? await discardBuild(key: key)
                    throw LarderError(status: 0, code: "remote_mode",
                                      message: "building '\(key)' needs the server's files, which a client in remote mode cannot open: "
                                          + "build it from a client on the server's machine (LARDER_MODE=local there), "
                                          + "or check against a template or an uploaded store",
                                      details: ["key": .string(key)])
                }
                do {
                    try await migrate(path)
                    try await finishBuild(key: key)
                } catch {
                    // A migrator that failed, or a file the server refused: no one
                    // should wait for this build until its lease runs out.
                    if (error as? LarderError)?.code != "unknown_build" { try? await discardBuild(key: key) }
                    throw error
                }
                return key
            }
            // Another caller builds it: wait, in polls of at most 30 s.
            do {
                while true {
                    let left = deadline - ContinuousClock.now
                    let poll = min(max(left, .zero), Defaults.buildPoll)
                    let info: BuildInfo = try await send("GET", "/builds/" + LarderClient.escapePath(key),
                                                         query: [("wait", "ready"), ("timeout_ms", String(poll.wholeMilliseconds))],
                                                         timeout: poll + requestTimeout)
                    if info.state == "ready" { return key }
                }
            } catch let error as LarderError where error.code == "timeout" && ContinuousClock.now < deadline {
                continue
            } catch let error as LarderError where error.code == "unknown_build" {
                continue // its builder gave up: ask again
            }
        }
    }

    /// `POST /builds/{key}/finish`, waiting out a write transaction still
    /// open on the file (409 with `Retry-After`) a few times.
    func finishBuild(key: String) async throws {
        let _: BuildInfo = try await withConflictRetries { try await send("POST", "/builds/" + LarderClient.escapePath(key) + "/finish") }
    }

    /// `GET /builds`: every build, under way and ready.
    public func builds() async throws -> [BuildInfo] {
        struct List: Decodable { var builds: [BuildInfo] }
        let list: List = try await send("GET", "/builds")
        return list.builds
    }

    /// `GET /builds/{key}`.
    public func buildInfo(key: String) async throws -> BuildInfo {
        try await send("GET", "/builds/" + LarderClient.escapePath(key))
    }

    /// `DELETE /builds/{key}`: the next ``build(key:label:timeout:migrate:)`` builds it again.
    public func discardBuild(key: String) async throws {
        let _: Empty = try await send("DELETE", "/builds/" + LarderClient.escapePath(key))
    }
}
