// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import LarderCore
import ObjectStore
import Synchronization

/// `--artifacts-url`: the artifact of every store kept because its test
/// failed goes to the bucket as `PREFIX/RUN/LABEL-ID.zip`, with the store's
/// creation state in it, so `larder open` shows the failure's database and
/// its diff on any machine. In the background, one at a time; a failure is
/// logged and counted, never answered.
final class ArtifactUploads: Sendable {
    let bucket: Bucket
    /// The run's folder: the CI's run id, else the server's start time.
    let run: String
    private let stats_ = Mutex<(uploads: Int, errors: Int)>((0, 0))
    private let uploading = BackgroundLine(label: "larder.artifact-uploads")

    init(bucket: Bucket, run: String) {
        self.bucket = bucket
        self.run = run
    }

    /// The uploads `--artifacts-url` asks for; nil when it is not set, and
    /// (said through `warn`) when they cannot be made: no libcurl, no keys.
    static func make(_ configuration: Configuration, _ environment: [String: String], startedAt: Timestamp,
                     warn: (String) -> Void) throws -> ArtifactUploads? {
        guard let url = configuration.artifactsURL else { return nil }
        if let why = Bucket.unavailable { warn("--artifacts-url is set but artifacts cannot be uploaded: \(why)") }
        let access = BucketAccess.fromEnvironment(environment)
        guard access.isSigned else {
            warn("--artifacts-url is set but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not: artifacts are not uploaded")
            return nil
        }
        return ArtifactUploads(bucket: Bucket(url: try BucketURL(url), access: access, timeoutMs: configuration.cacheTimeoutMs),
                               run: configuration.artifactsRun ?? run(environment, startedAt: startedAt))
    }

    /// The run's name when `--artifacts-run` names none: what CI systems call their run, else the time.
    static func run(_ environment: [String: String], startedAt: Timestamp) -> String {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let named = value("GITHUB_RUN_ID").map { id in value("GITHUB_RUN_ATTEMPT").map { id + "-" + $0 } ?? id }
            ?? value("CI_PIPELINE_ID") ?? value("BUILDKITE_BUILD_ID")
        if let named { return safe(named) }
        let t = startedAt.rfc3339 // 2026-11-27T10:00:00.123Z
        return String(t.prefix(19).filter { $0 != "-" && $0 != ":" }) + "Z"
    }

    var stats: (uploads: Int, errors: Int) { stats_.withLock { $0 } }

    /// The object's name for `record`: `RUN/LABEL-ID.zip`, the label's
    /// other bytes as `_` (`RUN/ID.zip` without a label).
    func name(_ record: StoreRecord) -> String {
        run + "/" + (record.label.map { ArtifactUploads.safe($0) + "-" } ?? "") + record.id + ".zip"
    }

    /// `text`'s first 100 bytes, each outside an object name's own (and `/`) as `_`.
    static func safe(_ text: String) -> String {
        String(decoding: text.utf8.prefix(100).map { BucketURL.isNameByte($0) && $0 != 0x2f ? $0 : 0x5f }, as: UTF8.self)
    }

    /// Uploads `store`'s artifact as it is now, in the background.
    func upload(_ store: Store, _ s: ServerContext) {
        uploading.submit { [self] in
            let object = name(store.record)
            let file = s.layout.temporary + "/upload-" + store.id + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".zip"
            defer { FileSystem.remove(file) }
            do {
                try FileSystem.writeFile([], to: file, mode: 0o600)
                let out = try AppendingFile(path: file)
                let writer = try ArtifactWriter(of: store, temporaryDirectory: s.layout.temporary, method: .deflate,
                                                diffMaxBytes: min(s.configuration.queryMaxBytes, ArtifactRoutes.diffMaxBytes), diff: DiffAnswer.json,
                                                withBase: true, sink: { try out.append($0) })
                while try !writer.step() {}
                try bucket.upload(object, file: file, contentType: "application/zip")
                stats_.withLock { $0.uploads += 1 }
                s.logger.info("artifact uploaded", metadata: ["store": .string(store.id), "url": .string("s3://\(bucket.url.bucket)/\(bucket.url.key(object))")])
            } catch {
                stats_.withLock { $0.errors += 1 }
                s.logger.warning("artifact upload failed", metadata: ["store": .string(store.id), "url": .string(bucket.url.description), "error": .string("\(error)")])
            }
        }
    }

    /// Waits for the uploads under way, at most `timeout`.
    func drain(timeout: Duration) { uploading.drain(timeout: timeout) }
}
