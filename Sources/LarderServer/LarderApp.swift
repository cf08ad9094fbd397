import Foundation
import LarderCore
import Logging
import MicroHTTP

/// The whole server, built in one place for `larder serve` and the tests:
/// configuration in, a running HTTP server out.
public final class LarderApp: Sendable {
    public let configuration: Configuration
    let services: Services
    let server: Server
    private let reaper: Reaper

    public var registry: StoreRegistry { services.registry }
    /// Where the server logs (for the command line's own lines).
    public var logger: Logger { services.logger }

    /// `logger`: where the server logs; by default standard error in the
    /// configured format and level.
    public init(configuration: Configuration, logger: Logger? = nil) throws {
        try configuration.validate()
        self.configuration = configuration
        services = try Services(configuration: configuration, logger: logger)
        var settings = Server.Settings()
        settings.host = configuration.host
        settings.port = UInt16(configuration.port)
        settings.threads = configuration.threads
        settings.connectionLimit = configuration.connectionLimit
        settings.connectionTimeoutSeconds = configuration.connectionTimeoutSeconds
        settings.maxBodyBytes = configuration.maxBodyBytes
        settings.spoolDirectory = services.layout.temporary
        settings.headerTimeoutSeconds = configuration.headerTimeoutSeconds
        // On loopback every client has the same address.
        settings.connectionsPerAddress = configuration.listensOnLoopbackOnly ? 0 : configuration.connectionsPerAddress
        let router = Router(services: services)
        server = Server(settings: settings, handler: { request in router.route(request) }, refuse: { errorResponse(LarderError(refusal: $0)) })
        let logger = services.logger
        reaper = Reaper(registry: services.registry, intervalSeconds: configuration.reapIntervalSeconds) { removed in
            logger.info("reaped expired stores", metadata: ["stores": "\(removed.count)"])
        }
    }

    /// Starts listening; `port` and `baseURL` are known afterwards.
    public func start() throws {
        try server.start()
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        services.baseURL.withLock { $0 = configuration.publicURL ?? "http://\(host):\(server.port)" }
        services.session?.bind(base: services.base)
        reaper.start()
    }

    public func stop() {
        reaper.stop()
        services.waiter.cancelAll()
        services.builds.cancelWaits()
        server.stop()
        services.registry.close()
    }

    public var port: UInt16 { server.port }
    public var baseURL: String { services.baseURL.withLock { $0 } }
    /// The address actually listened on, for the "listening" line.
    public var listenURL: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "http://\(host):\(server.port)"
    }
}
