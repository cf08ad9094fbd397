import LarderCore
import Synchronization

/// What the routes work with: the core objects and the server's own counters.
final class Services: Sendable {
    let configuration: Configuration
    let registry: StoreRegistry
    let metrics = Metrics()
    let baseURL = Mutex<String>("")
    let startedAt = Timestamp.now

    init(configuration: Configuration) throws {
        self.configuration = configuration
        registry = try StoreRegistry(configuration: configuration)
    }

    var base: String { baseURL.withLock { $0 } }
}
