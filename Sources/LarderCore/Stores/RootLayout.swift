// SPDX-License-Identifier: Apache-2.0
import FileSystem

/// What lives where under the root, named in one place. The registry, the
/// template cache, app builds and the server's spooled bodies are each given
/// the folder that is theirs.
public struct RootLayout: Sendable {
    /// The root, as a real path.
    public let root: String

    public init(root: String) { self.root = root }

    /// Live stores, one folder each (`st_…/store.sqlite` and its base), and
    /// ready copies (a folder whose record is not in the journal yet).
    public var stores: String { root + "/stores" }
    /// The stores' records, a line each (`RecordJournal`).
    public var journal: String { root + "/stores.journal" }
    /// Stores being made, in its shards `0` to `127` in turn (see
    /// `StoreRegistry.makeStaging`): renamed into `stores/` once
    /// complete; emptied at start, but for the shards.
    public var building: String { root + "/building" }
    public static let stagingShards = 128
    public func staging(shard: Int) -> String { building + "/\(shard)" }
    /// What `building/` holds besides its empty shards: stores half made
    /// (`3/st_…`), and anything else put there (a shard that is a link is
    /// itself, never looked into). Empty when no store is being made.
    public var halfMade: [String] {
        FileSystem.entries(building).flatMap { name -> [String] in
            guard let shard = Int(name), String(shard) == name, (0..<RootLayout.stagingShards).contains(shard),
                  FileSystem.isDirectory(staging(shard: shard), followingLinks: false) else { return [name] }
            return FileSystem.entries(staging(shard: shard)).map { name + "/" + $0 }
        }
    }
    /// Scratch files (spooled bodies, copies under way); emptied at start.
    public var temporary: String { root + "/tmp" }
    /// The template cache: one immutable database per template entry.
    public var cache: String { root + "/cache" }
    /// Where an earlier version kept its ready copies (they are in
    /// `stores/` now, without a record): emptied and removed at start.
    var olderReady: String { root + "/ready" }
    /// App-built templates under way (`/builds`).
    public var builds: String { root + "/builds" }
    /// The database of an app build under way (`builds/KEY-…/build.sqlite`).
    public static let buildDatabaseName = "build.sqlite"
    /// Deleted stores on their way out.
    public var trash: String { root + "/trash" }
    /// Held for a core's life: one Larder per root.
    public var lock: String { root + "/.larder-lock" }
    /// Says Larder owns the directory (it removes files below it).
    public var marker: String { root + "/.larder-root" }
}

/// The limits of work on stores, from the settings.
public struct StoreLimits: Sendable {
    /// A new store's lifetime unless it says otherwise (`--ttl-seconds`).
    public var ttlSeconds: Int
    /// A kept store's lifetime from when it was kept (`--kept-ttl-seconds`).
    public var keptTTLSeconds: Int
    /// Live stores and builds under way at most (`--max-stores`).
    public var maxStores: Int
    /// What stores may take on disk, 0 for no limit (`--max-disk-bytes`).
    public var maxDiskBytes: Int64
    /// Time limit of an operation on a store: fixtures, migrations, uploads, builds (`--operation-timeout-ms`).
    public var operationTimeoutMs: Int
    /// Time limit of a read: counts, schema, diff (`--read-timeout-ms`).
    public var readTimeoutMs: Int
    /// How long the server's writes wait for a lock a test holds (`--busy-timeout-ms`).
    public var busyTimeoutMs: Int

    public init(_ configuration: Configuration) {
        ttlSeconds = configuration.ttlSeconds
        keptTTLSeconds = configuration.keptTTLSeconds
        maxStores = configuration.maxStores
        maxDiskBytes = configuration.maxDiskBytes
        operationTimeoutMs = configuration.operationTimeoutMs
        readTimeoutMs = configuration.readTimeoutMs
        busyTimeoutMs = configuration.busyTimeoutMs
    }
}
