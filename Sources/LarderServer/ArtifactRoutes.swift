import Foundation
import LarderCore
import MicroHTTP
import Zip

/// `/artifact` (a streamed zip) and `/database` (the raw snapshot). The
/// snapshot and the compression run on a worker, never on a pool thread.
enum ArtifactRoutes {
    /// How many bytes of row values an artifact's `diff.json` holds at most.
    static let diffMaxBytes = 1 << 20

    static func fileName(_ record: StoreRecord, _ ext: String) -> String {
        let label = (record.label ?? "store").map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" }
        return String(label.prefix(80)) + "-" + record.id + "." + ext
    }

    static func artifact(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services, id = c["id"]
        let method: ZipWriter.Method
        switch request.queryValue("compression") ?? "deflate" {
        case "deflate": method = .deflate
        case "store": method = .store
        case let other: throw LarderError.badRequest("compression must be 'deflate' or 'store', not '\(other)'")
        }
        let store = try s.registry.get(id)
        // Artifacts are made on a pool of their own, as many at once as
        // there are cores: a burst of downloads cannot take the threads that
        // queries and uploads need.
        return .whenReady { respond in
            // Still queued when the client leaves: never started.
            let start = BlockOperation {
                let snapshot: DatabaseSnapshot
                let stream: BodyStream
                do {
                    // The rows' values are held and compressed beside the
                    // database: bounded tighter than GET /diff (counts stay whole).
                    var diff = StoreDiff.Options()
                    diff.maxBytes = min(s.configuration.queryMaxBytes, ArtifactRoutes.diffMaxBytes)
                    snapshot = try DatabaseSnapshot(store: store, temporaryDirectory: s.registry.temporaryDirectory, diff: diff)
                    stream = try BodyStream(spoolDirectory: s.registry.temporaryDirectory)
                } catch {
                    respond(.failure(error))
                    return
                }
                let record = store.record
                let manifest: @Sendable (String) -> JSONValue = { sha256 in [
                    "id": .string(record.id), "label": JSONValue(record.label), "template": JSONValue(record.template),
                    "version": JSONValue(record.version), "snapshot": JSONValue(record.snapshot), "fixtures": JSONValue(record.fixtures),
                    "counts": JSONValue(counts: snapshot.counts), "schema": .object(snapshot.columns.map { ($0.0, JSONValue($0.1)) }),
                    "sqlite_version": .string(LarderVersion.sqlite), "sha256": .string(sha256),
                    "size_bytes": .int(Int64(snapshot.size)), "created_at": .string(record.createdAt.rfc3339),
                    "snapshot_at": .string(Timestamp.now.rfc3339), "larder_version": .string(LarderVersion.current),
                    "changes": snapshot.changeCounts ?? .null,
                ] }
                // Made a few MiB ahead of what the client has read, one round at
                // a time on the artifact pool: a client that stops reading stops
                // the work and holds no thread.
                let writer = ArtifactWriter(snapshot: snapshot, method: method, manifest: manifest) { try stream.write($0) }
                let round: @Sendable () -> Void = {
                    s.artifacts.addOperation {
                        do {
                            repeat {
                                if try writer.step() { stream.finish(); return }
                            } while stream.wantsMore()
                        } catch {
                            if !(error is BodyStream.Cancelled) { c.logger.error("artifact failed", metadata: ["store": .string(id), "error": .string("\(error)")]) }
                            stream.fail()
                        }
                    }
                }
                stream.pace(readAhead: 2 * ZipWriter.batchSize, round)
                respond(.success(Response(status: 200, headers: [
                    ("Content-Type", "application/zip"),
                    ("Content-Disposition", "attachment; filename=\"\(fileName(record, "zip"))\""),
                ], body: .stream(stream))))
                round()
            }
            s.artifacts.addOperation(start)
            return { start.cancel() }
        }
    }

    static func database(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.services
        let store = try s.registry.get(c["id"])
        return .later {
            let snapshot = try DatabaseSnapshot(store: store, temporaryDirectory: s.registry.temporaryDirectory)
            let sums = try snapshot.checksums()
            return Response(status: 200, headers: [
                ("Content-Type", "application/vnd.sqlite3"),
                ("Content-Disposition", "attachment; filename=\"\(fileName(store.record, "sqlite"))\""),
                ("X-Larder-SHA256", sums.sha256),
            ], body: .file(descriptor: snapshot.takeDescriptor(), size: snapshot.size))
        }
    }
}
