import Foundation
import LarderClient
import TestSupport

/// One real Larder server (in process, port 0, a temporary root, the
/// repository's fixtures/) for this target's tests, started at first use;
/// its root is removed when the process exits.
enum ClientTestServer {
    static let server: TestServer = {
        let server = try! TestServer()
        atexit { try? FileManager.default.removeItem(atPath: ClientTestServer.server.root) }
        return server
    }()

    /// A client of it, whatever LARDER_URL and LARDER_TOKEN say.
    static let client = LarderClient(url: URL(string: server.base)!, token: "")
}
