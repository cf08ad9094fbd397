// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import LarderCore
import Logging
import MicroHTTP

/// The whole server, built in one place for `larder serve` and the tests:
/// configuration in, a running HTTP server out.
public final class LarderApp: Sendable {
    public let configuration: Configuration
    let context: ServerContext
    let server: Server
    private let reaper: Reaper

    public var registry: StoreRegistry { context.registry }
    /// Where the server logs (for the command line's own lines).
    public var logger: Logger { context.logger }

    /// `logger`: where the server logs; by default standard error in the
    /// configured format and level.
    public init(configuration: Configuration, logger: Logger? = nil) throws {
        try configuration.validate()
        self.configuration = configuration
        context = try ServerContext(configuration: configuration, logger: logger)
        var settings = Server.Settings()
        settings.host = configuration.host
        settings.port = UInt16(configuration.port)
        settings.threads = configuration.threads
        settings.connectionLimit = configuration.connectionLimit
        settings.connectionTimeoutSeconds = configuration.connectionTimeoutSeconds
        settings.maxBodyBytes = configuration.maxBodyBytes
        settings.spoolDirectory = context.layout.temporary
        settings.headerTimeoutSeconds = configuration.headerTimeoutSeconds
        // On loopback every client has the same address.
        settings.connectionsPerAddress = configuration.listensOnLoopbackOnly ? 0 : configuration.connectionsPerAddress
        if configuration.ownUserOnly, PeerUser.isAvailable {
            settings.peerUsers = [FileSystem.userID, 0]
        } else if configuration.ownUserOnly {
            // Refusing every connection would leave `larder up` no use; serving
            // them all must not pass unsaid.
            context.logger.warning("""
                this system cannot tell which user a loopback connection comes from (only Linux can): \
                every user of this machine can reach this server
                """)
        }
        let router = Router(server: context)
        server = Server(settings: settings, handler: { request in router.route(request) }, refuse: { errorResponse(LarderError(refusal: $0)) })
        let logger = context.logger
        reaper = Reaper(registry: context.registry, intervalSeconds: configuration.reapIntervalSeconds) { removed in
            logger.info("reaped expired stores", metadata: ["stores": "\(removed.count)"])
        }
    }

    /// Starts listening; `port` and `baseURL` are known afterwards.
    public func start() throws {
        try server.start()
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        context.baseURL.withLock { $0 = configuration.publicURL ?? "http://\(host):\(server.port)" }
        context.session?.bind(base: context.base)
        reaper.start()
    }

    public func stop() {
        reaper.stop()
        context.waiter.cancelAll()
        context.builds.cancelWaits()
        server.stop()
        context.workers.stop()
        context.artifacts.stop()
        context.artifactUploads?.drain(timeout: context.configuration.bucketGrace)
        context.core.close()
    }

    public var port: UInt16 { server.port }

    /// Makes a kept store of an artifact's files (`larder open`); answers its page's URL.
    public func open(database: String, base: String?, manifest: JSONValue) throws -> String {
        let store = try context.provisioner.createFromArtifact(
            database: database, base: base, label: manifest["label"]?.stringValue, template: manifest["template"]?.stringValue,
            version: manifest["version"]?.stringValue, fixtures: manifest["fixtures"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        return baseURL + "/stores/" + store.id + "/page"
    }
    /// Answers so far whose status their operation does not declare, by `METHOD /route status` (none, while the contract holds).
    public var undeclaredAnswers: [String: Int] { context.undeclared.withLock { $0 } }
    /// The templates of the fixtures folder now.
    public var templateNames: [String] { context.catalog.names() }
    public var baseURL: String { context.baseURL.withLock { $0 } }
    /// The address actually listened on, for the "listening" line.
    public var listenURL: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "http://\(host):\(server.port)"
    }
}
