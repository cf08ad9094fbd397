// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import LarderCore
import Logging
import ObjectStore
import Synchronization

/// What the routes work with: the core objects and the server's own counters.
final class ServerContext: Sendable {
    let configuration: Configuration
    let core: Core
    let layout: RootLayout
    let registry: StoreRegistry
    let catalog: Catalog
    let cache: TemplateCache
    let provisioner: Provisioner
    /// App-built templates (`/builds`).
    let builds: BuildRegistry
    let editor: StoreEditor
    let waiter = CountWaiter()
    let origins: Origins
    /// The browser's sign-in cookie, when a token is set.
    let session: SessionCookie?
    /// `/openapi.json` with this server's limits, made once.
    let openAPI: [UInt8]
    let metrics = Metrics()
    let baseURL = Mutex<String>("")
    let startedAt = Timestamp.now
    /// Where artifacts are made: as many at once as there are cores, apart from other request work.
    let artifacts = Workers(maxThreads: max(ProcessInfo.processInfo.activeProcessorCount, 2), keptThreads: 0)
    /// Where `.later` work runs: a thread each, at most four per store or build.
    let workers = Workers()
    let lastCheck = Mutex<(at: Timestamp, results: [MigrationCheck.Report])?>(nil)
    /// Answers whose status their operation does not declare, by `METHOD /route status`:
    /// the contract has drifted from what the handler throws (logged, counted, and failed in tests).
    let undeclared = Mutex<[String: Int]>([:])

    let logger: Logger
    /// `--artifacts-url`: kept stores' artifacts uploaded.
    let artifactUploads: ArtifactUploads?

    init(configuration: Configuration, logger: Logger? = nil) throws {
        self.configuration = configuration
        self.logger = logger ?? .larder(configuration)
        origins = Origins(configuration: configuration)
        session = configuration.token.map { SessionCookie(token: $0, publicURL: configuration.publicURL) }
        openAPI = OpenAPI.document(for: configuration).serialized()
        let logger = self.logger, environment = ProcessInfo.processInfo.environment
        let core = try Core(configuration: configuration, environment: environment) { logger.warning("\($0)") }
        self.core = core
        artifactUploads = try ArtifactUploads.make(configuration, environment, startedAt: startedAt) { logger.warning("\($0)") }
        layout = core.layout
        registry = core.registry
        catalog = core.catalog
        cache = core.cache
        provisioner = core.provisioner
        builds = core.builds
        editor = core.editor
    }

    var base: String { baseURL.withLock { $0 } }

    /// The writer of single store answers (a hand-out, a reset), made once
    /// for the base URL; a listing makes its own per part (`StoreAnswer.Writer`).
    var storeAnswers: StoreAnswer.Writer {
        let base = self.base
        return answerWriter.withLock { kept in
            if let kept, kept.base == base { return kept.writer }
            let writer = StoreAnswer.Writer(self)
            kept = (base, writer)
            return writer
        }
    }
    private let answerWriter = Mutex<(base: String, writer: StoreAnswer.Writer)?>(nil)
}
