// SPDX-License-Identifier: Apache-2.0
import FileSystem
import ObjectStore
import SQLite
import Synchronization
import Zip

/// The template cache of a whole CI fleet: entries kept in an S3 bucket
/// (`--cache-url`), so that each key is built once by the first runner
/// that meets it and downloaded by every other.
///
/// In the bucket, per key, a small manifest `manifests/KEY.json` names the
/// object `objects/SHA.sqlite.gz`: the database gzip-compressed, SHA being
/// the SHA-256 of the uncompressed database. The object goes up first and
/// the manifest last, so no reader finds a manifest before its object;
/// reads are by name, never by listing. Writers are trusted CI, yet what
/// comes down is checked (SHA-256, size, SQLite, `integrity_check`,
/// hardened) and refused, then built here and published again, when it
/// fails. Faults never fail a request: a bucket that does not answer costs
/// one time limit, then is left alone for a while.
public final class FleetCache: Sendable {
    public let bucket: Bucket
    /// Reads only, never publishes (runners of pull requests from forks).
    public let readOnly: Bool
    /// Time limit of the checks of a download (`--operation-timeout-ms`).
    let checkTimeoutMs: Int
    let warn: @Sendable (String) -> Void

    /// The manifests' format; another is a miss.
    static let format = 1
    /// How long a bucket that did not answer is left alone.
    static let backOff: Duration = .seconds(60)
    static let manifestMaxBytes = 1 << 20

    public struct Stats: Sendable {
        public var hits = 0, misses = 0, errors = 0, refused = 0, skipped = 0, published = 0
        public var downloadedBytes: Int64 = 0, uploadedBytes: Int64 = 0
        public init() {}
    }
    private struct State {
        var stats = Stats()
        var quietUntil: ContinuousClock.Instant?
        var toldAccessDenied = false
    }
    private let state = Mutex(State())
    private let publishing = BackgroundLine(label: "larder.fleet-cache")

    /// Without keys nothing is published (an anonymous reader of a public bucket).
    public init(bucket: Bucket, readOnly: Bool, checkTimeoutMs: Int, warn: @escaping @Sendable (String) -> Void) {
        self.bucket = bucket
        self.readOnly = readOnly || !bucket.access.isSigned
        self.checkTimeoutMs = checkTimeoutMs
        self.warn = warn
    }

    public var stats: Stats { state.withLock { $0.stats } }

    /// What a download brought: a checked database at `path` (the caller's to move or remove).
    public struct Fetched: Sendable {
        public var path: String
        public var version: String?
        public var counts: [(String, Int64)]
        public var build: JSONValue?
        public var template: JSONValue?
    }

    static func manifestName(_ key: String) -> String { "manifests/" + key + ".json" }
    static func objectName(_ sha256: String) -> String { "objects/" + sha256 + ".sqlite.gz" }

    /// The entry `key` from the bucket, checked, in a new file in `directory`;
    /// nil when the bucket has none, cannot be reached, or what it has is refused.
    public func fetch(_ key: String, into directory: String, maxBytes: Int64) -> Fetched? {
        guard awake() else { return nil }
        let manifest: JSONValue
        do {
            guard let bytes = try bucket.get(FleetCache.manifestName(key), maxBytes: FleetCache.manifestMaxBytes) else {
                count { $0.misses += 1 }
                return nil
            }
            guard let json = try? JSONValue.parse(bytes) else { return refuse(key, "its manifest is not JSON") }
            manifest = json
        } catch BucketError.status(403, code: "AccessDenied") {
            // S3 answers a missing object so to a reader without s3:ListBucket: a miss, said once.
            count { $0.misses += 1 }
            if state.withLock({ s in defer { s.toldAccessDenied = true }; return !s.toldAccessDenied }) {
                warn("fleet cache: \(bucket.url) answers AccessDenied for \(key)'s manifest: counted as a miss (S3 answers so for a missing object without s3:ListBucket; grant it, or s3:GetObject if it is missing)")
            }
            return nil
        } catch {
            return fault("cannot read \(key)'s manifest", error)
        }
        guard manifest["format"]?.intValue == Int64(FleetCache.format), manifest["key"]?.stringValue == key else {
            count { $0.misses += 1 } // another format's (another Larder's) entry
            return nil
        }
        guard let sha = manifest["sha256"]?.stringValue, sha.utf8.count == 64, sha.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
              manifest["object"]?.stringValue == FleetCache.objectName(sha), let size = manifest["size"]?.intValue, size > 0 else {
            return refuse(key, "its manifest does not name an object by its SHA-256 and size")
        }
        guard size <= maxBytes else { return refuse(key, "it is \(size) bytes, more than this cache's budget (\(maxBytes) bytes)") }
        let compressed = directory + "/" + key + "-" + RandomName.hex() + ".sqlite.gz"
        let plain = String(compressed.dropLast(3))
        defer { FileSystem.remove(compressed) }
        let moved: Int64
        do {
            // (gzip of a SQLite file is never much larger than the file.)
            guard let got = try bucket.download(FleetCache.objectName(sha), to: compressed, maxBytes: size + size / 8 + (1 << 16)) else {
                count { $0.misses += 1 } // expired by a lifecycle rule, say: built again and published
                warn("fleet cache: \(key)'s manifest names \(FleetCache.objectName(sha)), which the bucket does not have; building it here")
                return nil
            }
            moved = got
        } catch {
            return fault("cannot download \(key)", error)
        }
        count { $0.downloadedBytes += moved }
        do {
            let unpacked = try Gzip.decompress(compressed, to: plain, maxBytes: size)
            guard unpacked == Gzip.Plain(sha256: sha, size: size) else {
                FileSystem.remove(plain)
                return refuse(key, "its object's SHA-256 or size differs from its manifest's")
            }
        } catch {
            return refuse(key, "its object is not a gzip of a database (\(error))")
        }
        do {
            let (version, counts) = try check(plain, manifest: manifest)
            count { $0.hits += 1 }
            func member(_ name: String) -> JSONValue? { manifest[name].flatMap { $0.objectMembers == nil ? nil : $0 } }
            return Fetched(path: plain, version: version, counts: counts, build: member("build"), template: member("template"))
        } catch {
            FileSystem.removeDatabase(plain)
            return refuse(key, "\(error)")
        }
    }

    /// What any template gets: a SQLite database that passes
    /// `integrity_check`, opened hardened (its schema is as good as a
    /// client's SQL) and time-limited, in WAL mode, checkpointed, counted.
    private func check(_ path: String, manifest: JSONValue) throws -> (String?, [(String, Int64)]) {
        guard try FileSystem.readPrefix(path, count: 16) == Connection.fileMagic else {
            throw LarderError.badRequest("its object is not a SQLite database")
        }
        let db = try Connection(path: path, mode: .readWrite)
        try db.harden()
        return try db.limited(milliseconds: checkTimeoutMs, "checking a download of the fleet cache") {
            let problems = try db.rows("PRAGMA integrity_check").compactMap { $0[0].string }
            guard problems == ["ok"] else { throw LarderError.badRequest("it fails integrity_check: \(problems.prefix(3).joined(separator: "; "))") }
            try db.execute("PRAGMA journal_mode=WAL")
            let counts = try Inspector.counts(db)
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            // The version the builder recorded (a template's comes from its migrations, which the key names).
            let version = manifest["version"]?.stringValue.map { String($0.prefix(200)) }
            return (version, counts)
        }
    }

    /// Publishes `entry` in the background: the object, then its manifest.
    public func publish(_ entry: TemplateCache.Entry) {
        guard !readOnly else { return }
        publishing.submit { [self] in
            guard awake() else { return }
            let compressed = FileSystem.parent(entry.path) + "/tmp/" + entry.key + "-" + RandomName.hex() + ".sqlite.gz"
            defer { FileSystem.remove(compressed) }
            let plain: Gzip.Plain
            do {
                plain = try Gzip.compress(entry.path, to: compressed)
            } catch {
                // Evicted meanwhile, say: the next server to miss it publishes it.
                warn("fleet cache: cannot compress \(entry.key) to publish it: \(error)")
                return
            }
            var manifest: [(String, JSONValue)] = [
                ("format", .int(Int64(FleetCache.format))), ("key", .string(entry.key)),
                ("object", .string(FleetCache.objectName(plain.sha256))), ("sha256", .string(plain.sha256)),
                ("size", .int(plain.size)), ("compressed_size", .int(FileSystem.size(compressed))),
                ("version", JSONValue(entry.version)), ("counts", JSONValue(counts: entry.counts)),
                ("larder", .string(LarderVersion.current)), ("sqlite", .string(LarderVersion.sqlite)),
                ("published_at", .double(Timestamp.now.seconds)),
            ]
            if let build = entry.build { manifest.append(("build", build)) }
            if let template = entry.template { manifest.append(("template", template)) }
            do {
                // Always sent, never skipped when present: the object there may be the one a reader refused.
                let sent = try bucket.upload(FleetCache.objectName(plain.sha256), file: compressed, contentType: "application/gzip")
                try bucket.put(FleetCache.manifestName(entry.key), bytes: JSONValue.object(manifest).serialized(), contentType: "application/json")
                count { s in
                    s.published += 1
                    s.uploadedBytes += sent
                }
            } catch {
                _ = fault("cannot publish \(entry.key)", error)
            }
        }
    }

    /// Waits for the publishing under way, at most `timeout`.
    public func drain(timeout: Duration) { publishing.drain(timeout: timeout) }

    /// A fault outside a fetch or a publish (keeping a download, say).
    func failed(_ why: String) {
        count { $0.errors += 1 }
        warn("fleet cache: " + why)
    }

    private func count(_ change: (inout Stats) -> Void) { state.withLock { change(&$0.stats) } }

    /// False (and skipped) while a bucket that did not answer is left alone.
    private func awake() -> Bool {
        state.withLock { s in
            if let until = s.quietUntil, until > .now {
                s.stats.skipped += 1
                return false
            }
            s.quietUntil = nil
            return true
        }
    }

    private func fault(_ what: String, _ error: Error) -> Fetched? {
        let transport = (error as? BucketError)?.isTransport ?? false
        state.withLock { s in
            s.stats.errors += 1
            if transport { s.quietUntil = .now + FleetCache.backOff }
        }
        warn("fleet cache: \(what) from \(bucket.url): \(error)" + (transport ? "; the bucket is left alone for \(Int(FleetCache.backOff.seconds)) s, templates are built here" : "; building it here"))
        return nil
    }

    private func refuse(_ key: String, _ why: String) -> Fetched? {
        count { $0.refused += 1 }
        warn("fleet cache: refused \(key) from \(bucket.url): \(why); building it here and publishing it again")
        return nil
    }
}
