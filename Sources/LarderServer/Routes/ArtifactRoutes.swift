// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import LarderCore
import MicroHTTP
import Zip

/// `/artifact` (a streamed zip) and `/database` (the raw snapshot). The
/// snapshot and the compression run on a worker, never on a request thread.
enum ArtifactRoutes {
    /// How many bytes of row values an artifact's `diff.json` holds at most.
    static let diffMaxBytes = 1 << 20

    static func fileName(_ record: StoreRecord, _ ext: String) -> String {
        let label = (record.label ?? "store").map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" }
        return String(label.prefix(80)) + "-" + record.id + "." + ext
    }

    static func artifact(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = try c.parameter("id")
        let method: ZipWriter.Method
        switch request.queryValue("compression") ?? "deflate" {
        case "deflate": method = .deflate
        case "store": method = .store
        case let other: throw LarderError.badRequest("compression must be 'deflate' or 'store', not '\(other)'")
        }
        let withBase: Bool
        switch request.queryValue("base") ?? "false" {
        case "true": withBase = true
        case "false": withBase = false
        case let other: throw LarderError.badRequest("base must be 'true' or 'false', not '\(other)'")
        }
        let store = try s.registry.get(id)
        // Artifacts are made on workers of their own, as many at once as
        // there are cores: a burst of downloads cannot take the threads that
        // queries and uploads need.
        return .whenReady { respond in
            // Still queued when the client leaves: never started.
            let left = Latch()
            s.artifacts.submit(line: nil) {
                guard !left.isSet else { return }
                let stream: BodyStream, writer: ArtifactWriter
                do {
                    stream = try BodyStream(spoolDirectory: s.layout.temporary)
                    // The rows' values are held and compressed beside the
                    // database: bounded tighter than GET /diff (counts stay whole).
                    writer = try ArtifactWriter(of: store, temporaryDirectory: s.layout.temporary, method: method,
                                                diffMaxBytes: min(s.configuration.queryMaxBytes, ArtifactRoutes.diffMaxBytes), diff: DiffAnswer.json,
                                                withBase: withBase, sink: { try stream.write($0) },
                                                fileSink: { try stream.append(file: $0, offset: $1, count: $2) })
                } catch {
                    respond(.failure(error))
                    return
                }
                let round = pace(writer, into: stream, on: s.artifacts) { error in
                    c.logger.error("artifact failed", metadata: ["store": .string(id), "error": .string("\(error)")])
                }
                respond(.success(Response(status: 200, headers: [
                    ("Content-Type", "application/zip"),
                    ("Content-Disposition", "attachment; filename=\"\(fileName(store.record, "zip"))\""),
                ], body: .stream(stream))))
                round()
            }
            return { left.set() }
        }
    }

    /// Makes the zip a few MiB ahead of what the client has read, one round
    /// at a time on `queue`: a client that stops reading stops the work and
    /// holds no thread. Answers the first round, to start once the answer is sent.
    static func pace(_ writer: ArtifactWriter, into stream: BodyStream, on workers: Workers,
                     failed: @escaping @Sendable (Error) -> Void) -> @Sendable () -> Void {
        let round: @Sendable () -> Void = {
            workers.submit(line: nil) {
                do {
                    repeat {
                        if try writer.step() { stream.finish(); return }
                    } while stream.wantsMore()
                } catch {
                    if !(error is BodyStream.Cancelled) { failed(error) }
                    stream.fail()
                }
            }
        }
        stream.pace(readAhead: 2 * ZipWriter.batchSize, round)
        return round
    }

    static func database(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server
        let store = try s.registry.get(c.parameter("id"))
        return .later {
            let snapshot = try DatabaseSnapshot(store: store, temporaryDirectory: s.layout.temporary)
            let sums = try snapshot.checksums()
            return Response(status: 200, headers: [
                ("Content-Type", "application/vnd.sqlite3"),
                ("Content-Disposition", "attachment; filename=\"\(fileName(store.record, "sqlite"))\""),
                ("X-Larder-SHA256", sums.sha256),
            ], body: .file(descriptor: snapshot.takeDescriptor(), size: snapshot.size))
        }
    }
}
