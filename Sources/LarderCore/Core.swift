// SPDX-License-Identifier: Apache-2.0
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
    public init(configuration: Configuration, readyCopies: Int? = nil) throws {
        self.configuration = configuration
        registry = try StoreRegistry(configuration: configuration, readyCopies: readyCopies ?? configuration.readyCopies)
        layout = registry.layout
        limits = registry.limits
        catalog = Catalog(directory: configuration.fixtures)
        cache = TemplateCache(directory: layout.cache, temporaryDirectory: layout.temporary,
                              maxBytes: configuration.cacheMaxBytes)
        provisioner = Provisioner(registry: registry, catalog: catalog, cache: cache)
        builds = try BuildRegistry(registry: registry, cache: cache, lease: .seconds(configuration.buildLeaseSeconds))
        editor = StoreEditor(registry: registry, catalog: catalog)
    }

    /// Waits for the trash, then lets another core take the root.
    public func close() { registry.close() }
}
