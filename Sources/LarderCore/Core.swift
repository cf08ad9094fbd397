// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import ObjectStore

/// The core, built in one place from the settings: the server, `larder
/// warm` and the tests all start from it. Opening it takes the root (one
/// core per root at a time, see `StoreRegistry`); `close()` gives it back.
public final class Core: Sendable {
    public let configuration: Configuration
    /// What lives where under the root, and the limits of work on stores.
    public let layout: RootLayout
    public let limits: StoreLimits
    public let registry: StoreRegistry
    public let catalog: Catalog
    public let cache: TemplateCache
    public let provisioner: Provisioner
    /// App-built templates (`/builds`).
    public let builds: BuildRegistry
    public let editor: StoreEditor

    /// `readyCopies`: ready copies per template entry, when not `--ready-copies`.
    /// `warn`: where faults that fail no request are told (the fleet cache's).
    public init(configuration: Configuration, readyCopies: Int? = nil, environment: [String: String] = ProcessInfo.processInfo.environment,
                warn: @escaping @Sendable (String) -> Void = { FileSystem.writeText("larder: " + $0 + "\n", to: 2) }) throws {
        self.configuration = configuration
        registry = try StoreRegistry(configuration: configuration, readyCopies: readyCopies ?? configuration.readyCopies)
        layout = registry.layout
        limits = registry.limits
        catalog = Catalog(directory: configuration.fixtures)
        let fleet = try configuration.cacheURL.map { url in
            let access = BucketAccess.fromEnvironment(environment)
            if let why = Bucket.unavailable { warn("fleet cache: \(why); templates are built here") }
            if !access.isSigned { warn("fleet cache: no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: \(url) is read anonymously, and nothing is published to it") }
            return FleetCache(bucket: Bucket(url: try BucketURL(url), access: access, timeoutMs: configuration.cacheTimeoutMs),
                              readOnly: configuration.cacheReadOnly, checkTimeoutMs: configuration.operationTimeoutMs, warn: warn)
        }
        cache = try TemplateCache(directory: configuration.cacheDirectory ?? layout.cache, maxBytes: configuration.cacheMaxBytes, fleet: fleet)
        provisioner = Provisioner(registry: registry, catalog: catalog, cache: cache)
        builds = try BuildRegistry(registry: registry, cache: cache, lease: .seconds(configuration.buildLeaseSeconds))
        editor = StoreEditor(registry: registry, catalog: catalog)
    }

    /// Waits for the trash and for what is being published to the fleet's
    /// cache, then lets another core take the root.
    public func close() {
        cache.fleet?.drain(timeout: configuration.bucketGrace)
        registry.close()
    }
}
