import Foundation
import Platform
import Synchronization
@testable import MicroHTTP
import XCTest

/// A raw HTTP/1.1 exchange over a socket: what is sent is sent as written.
struct RawClient {
    let port: UInt16

    /// Sends `request` and reads until the server closes or `until` holds.
    func exchange(_ request: [UInt8], readTimeout: Double = 10, until done: ([UInt8]) -> Bool = { _ in false }) throws -> [UInt8] {
        let fd = try connect()
        defer { close(fd) }
        try send(fd, request)
        return read(fd, timeout: readTimeout, until: done)
    }

    func connect() throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Platform.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
        return fd
    }

    func send(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Platform.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            sent += n
        }
    }

    func read(_ fd: Int32, timeout: Double, until done: ([UInt8]) -> Bool) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline && !done(out) {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }
}

extension Array where Element == UInt8 {
    var text: String { String(decoding: self, as: UTF8.self) }
    var status: Int? { text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } }
}

/// The HTTP layer on its own, with handlers written for each test.
final class MicroHTTPServerTests: XCTestCase {
    func withServer(_ configure: (inout Server.Settings) -> Void = { _ in }, handler: @escaping Server.Handler,
                    _ body: (Server, RawClient) throws -> Void) throws {
        var settings = Server.Settings()
        settings.port = 0
        settings.threads = 2
        let spool = NSTemporaryDirectory() + "microhttp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: spool) }
        settings.spoolDirectory = spool
        configure(&settings)
        let server = Server(settings: settings, handler: handler) { refusal in
            let status: Int
            switch refusal {
            case .payloadTooLarge: status = 413
            case .ambiguousLength: status = 400
            case .bodyNotKept: status = 507
            case .shuttingDown: status = 503
            case .otherUser: status = 403
            }
            return Response(status: status, contentType: "text/plain", bytes: Array("refused: \(refusal)".utf8))
        }
        try server.start()
        defer { server.stop() }
        try body(server, RawClient(port: server.port))
    }

    static func get(_ path: String, _ extra: String = "") -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(extra)\r\n".utf8)
    }

    func testTheMediaTypeIsTheTypeWithoutParametersLowerCased() {
        func type(_ header: String?) -> String? {
            Request(method: "POST", path: "/", headers: header.map { ["content-type": $0] } ?? [:]).mediaType
        }
        XCTAssertEqual(type("Application/JSON ; charset=utf-8"), "application/json")
        XCTAssertEqual(type(" \ttext/CSV"), "text/csv")
        XCTAssertEqual(type("application/vnd.sqlite3"), "application/vnd.sqlite3")
        XCTAssertEqual(type(";"), "")
        XCTAssertEqual(type("\u{A0}Text/Plain\u{A0}"), "text/plain", "a no-break space is a space, as Foundation trims")
        XCTAssertNil(type(nil))
    }

    func testTheProbeGetsAnAnswerAndFailsFastWhenThereIsNone() throws {
        try withServer(handler: { request in
            .now(Response(status: request.header("host")?.hasPrefix("127.0.0.1:") == true ? 200 : 400, contentType: "application/json",
                          bytes: Array("{\"status\":\"ok\",\"path\":\"\(request.path)\"}".utf8)))
        }) { server, _ in
            let answer = try Probe.get("http://127.0.0.1:\(server.port)/prefix/", path: "/health", timeoutMs: 2000)
            XCTAssertEqual(answer.status, 200)
            XCTAssertEqual(String(decoding: answer.body, as: UTF8.self), "{\"status\":\"ok\",\"path\":\"/prefix/health\"}")
        }
        // Nobody listening: refused at once.
        let closed = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(closed, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(closed, $0, &length) } }
        let port = UInt16(bigEndian: address.sin_port)
        XCTAssertThrowsError(try Probe.get("http://127.0.0.1:\(port)", path: "/health", timeoutMs: 2000)) { error in
            XCTAssertTrue("\(error)".contains("refused"), "\(error)")
        }
        // Listening but never answering: given up at the deadline.
        listen(closed, 4)
        defer { close(closed) }
        let started = ContinuousClock.now
        XCTAssertThrowsError(try Probe.get("http://127.0.0.1:\(port)", path: "/health", timeoutMs: 300)) { error in
            XCTAssertTrue("\(error)".contains("timed out"), "\(error)")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
        for bad in ["https://127.0.0.1", "127.0.0.1:7464", "http://:80", "http://host:99999", "http://[::1"] {
            XCTAssertThrowsError(try Probe.get(bad, path: "/health", timeoutMs: 100), bad)
        }
    }

    func testTheProbeReadsChunkedAnswers() throws {
        let chunked = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n".utf8)
        XCTAssertEqual(String(decoding: try Probe.parse(chunked).body, as: UTF8.self), "{\"a\":1}")
        XCTAssertThrowsError(try Probe.parse(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nab".utf8)))
        XCTAssertThrowsError(try Probe.parse(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)))
    }

    func testALaterAnswerResumesTheSuspendedConnection() throws {
        try withServer(handler: { request in
            .later { responder in
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) {
                    responder.send(Response(status: 200, contentType: "text/plain", bytes: Array("later \(request.path)".utf8)))
                }
            }
        }) { _, client in
            let answer = try client.exchange(Self.get("/x"))
            XCTAssertEqual(answer.status, 200)
            XCTAssertTrue(answer.text.hasSuffix("later /x"), answer.text)
        }
    }

    /// `peerUsers`: a connection from a process of a user not named is
    /// answered 403 on every request, however it is sent; a named user's is served.
    func testOnlyThePeerUsersNamedAreServed() throws {
        forcingLinuxCalls() // the kernel tells the peer's user: Linux's sock_diag
        let me = getuid()
        try withServer({ $0.peerUsers = [me] }, handler: { _ in .now(Response(status: 200, contentType: "text/plain", bytes: Array("in".utf8))) }) { _, client in
            XCTAssertEqual(try client.exchange(Self.get("/x")).status, 200)
        }
        try withServer({ $0.peerUsers = [me &+ 1] }, handler: { _ in .now(Response(status: 200, contentType: "text/plain", bytes: Array("in".utf8))) }) { _, client in
            let answer = try client.exchange(Self.get("/x"))
            XCTAssertEqual(answer.status, 403, answer.text)
            XCTAssertTrue(answer.text.contains("otherUser(uid: Optional(\(me)))"), answer.text)
            // A body on a kept-alive connection changes nothing.
            let fd = try client.connect()
            defer { close(fd) }
            let post = Array("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
            try client.send(fd, post)
            let both = client.read(fd, timeout: 10) { $0.text.components(separatedBy: "HTTP/1.1 ").count > 2 }.text
            XCTAssertFalse(both.contains("HTTP/1.1 200"), both)
        }
    }

    /// The kernel's two ways of telling who owns a loopback connection's
    /// other end agree, for IPv4 and IPv6; a descriptor that is no TCP
    /// connection has none.
    func testThePeersUserIsTheKernelsWordOnIt() throws {
        forcingLinuxCalls()
        for family in [AF_INET, AF_INET6] {
            let listener = socket(family, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(listener) }
            var storage = sockaddr_storage()
            var length: socklen_t
            if family == AF_INET {
                length = socklen_t(MemoryLayout<sockaddr_in>.size)
                withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    $0.pointee.sin_family = sa_family_t(AF_INET); $0.pointee.sin_addr.s_addr = inet_addr("127.0.0.1")
                } }
            } else {
                length = socklen_t(MemoryLayout<sockaddr_in6>.size)
                withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    $0.pointee.sin6_family = sa_family_t(AF_INET6); $0.pointee.sin6_addr = in6addr_loopback
                } }
            }
            let bound = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
            guard bound == 0 else { continue } // no IPv6 loopback here
            XCTAssertEqual(listen(listener, 4), 0)
            _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
            let client = socket(family, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(client) }
            let connected = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Platform.connect(client, $0, length) } }
            XCTAssertEqual(connected, 0)
            let accepted = accept(listener, nil, nil)
            defer { close(accepted) }
            XCTAssertEqual(PeerUser.of(accepted, source: .sockDiag), getuid(), "family \(family)")
            XCTAssertEqual(PeerUser.of(accepted, source: .procNet), getuid(), "family \(family)")
            XCTAssertEqual(PeerUser.of(accepted), getuid())
        }
        let file = open("/dev/null", O_RDONLY)
        defer { close(file) }
        XCTAssertNil(PeerUser.of(file))
    }

    /// With the portable calls no peer's user is told, so a server that
    /// names its users refuses every connection, saying why (a LarderApp
    /// does not name them there: LarderAppTests).
    func testWithThePortableCallsNoPeersUserIsToldAndEveryConnectionIsRefused() throws {
        try Syscalls.forcing(portable: true) {
            XCTAssertFalse(PeerUser.isAvailable)
            try withServer({ $0.peerUsers = [getuid()] }, handler: { _ in .now(Response(status: 200, contentType: "text/plain", bytes: Array("in".utf8))) }) { _, client in
                let answer = try client.exchange(Self.get("/x"))
                XCTAssertEqual(answer.status, 403, answer.text)
                XCTAssertTrue(answer.text.contains("otherUser(uid: nil)"), answer.text)
            }
        }
        XCTAssertEqual(Syscalls.forcing(portable: false) { PeerUser.isAvailable }, true)
    }

    /// Linux's own calls for the rest of the test, however the run was started (`LARDER_PORTABLE_SYSCALLS`).
    func forcingLinuxCalls() {
        let was = Syscalls.portable
        Syscalls.portable = false
        addTeardownBlock { Syscalls.portable = was }
    }

    /// A body past `LentBytes.threshold` is lent to MHD rather than copied:
    /// it arrives whole, from `.now` and `.later` answers, though the
    /// handler has long let go of it.
    func testLargeBodiesAreSentWholeWithoutACopy() throws {
        @Sendable func body(_ path: String) -> [UInt8] {
            let seed = UInt8(truncatingIfNeeded: path.utf8.reduce(0) { $0 &+ Int($1) })
            return (0..<(LentBytes.threshold * 3 + 17)).map { UInt8(truncatingIfNeeded: $0 &* 31) &+ seed }
        }
        try withServer(handler: { request in
            let bytes = body(request.path)
            if request.path.hasSuffix("later") {
                return .later { responder in
                    DispatchQueue.global().async { responder.send(Response(status: 200, contentType: "application/octet-stream", bytes: bytes)) }
                }
            }
            return .now(Response(status: 200, contentType: "application/octet-stream", bytes: bytes))
        }) { _, client in
            for path in ["/a", "/b-later", "/c", "/d-later"] {
                let expected = body(path)
                let answer = try client.exchange(Self.get(path)) { $0.count >= expected.count && $0.suffix(expected.count).elementsEqual(expected) }
                XCTAssertEqual(answer.status, 200, path)
                XCTAssertTrue(answer.suffix(expected.count).elementsEqual(expected), path)
                XCTAssertTrue(answer.text.lowercased().contains("content-length: \(expected.count)\r\n"), path)
            }
        }
    }

    func testAClientThatLeavesASuspendedRequestIsSeenAtOnce() throws {
        let waiting = Mutex<[Responder]>([])
        let leftAt = Mutex<ContinuousClock.Instant?>(nil)
        try withServer(handler: { _ in
            .later { responder in
                responder.onHangup { leftAt.withLock { $0 = .now } }
                waiting.withLock { $0.append(responder) }
            }
        }) { server, client in
            let fd = try client.connect()
            try client.send(fd, Self.get("/wait"))
            let deadline = Date().addingTimeInterval(5)
            while waiting.withLock({ $0.isEmpty }) && Date() < deadline { usleep(1_000) }
            XCTAssertEqual(server.hangups.count, 1)
            let closed = ContinuousClock.now
            close(fd)
            while leftAt.withLock({ $0 == nil }) && Date() < deadline { usleep(1_000) }
            let seen = try XCTUnwrap(leftAt.withLock { $0 }, "the hangup handler ran")
            XCTAssertLessThan(seen - closed, .milliseconds(500), "seen at once, not at the next sweep")
            XCTAssertTrue(waiting.withLock { $0[0].isAnswered }, "the request was dropped")
            XCTAssertEqual(server.hangups.count, 0)
            // The connection went with it: the server stops without waiting on it.
            while server.live.withLock({ !$0.suspended.isEmpty }) && Date() < deadline { usleep(1_000) }
            XCTAssertTrue(server.live.withLock { $0.suspended.isEmpty })
        }
    }

    /// The same with the portable calls (libmicrohttpd polling with poll(2),
    /// a hangup read as the end of the stream), whichever way the run was started.
    func testAClientThatLeavesIsSeenAtOnceWithThePortableCallsToo() throws {
        try Syscalls.forcing(portable: true) { try testAClientThatLeavesASuspendedRequestIsSeenAtOnce() }
    }

    func testAnAnsweredRequestIsNoLongerWatched() throws {
        try withServer(handler: { _ in
            .later { responder in
                responder.onHangup { XCTFail("answered requests do not hang up") }
                responder.send(Response(status: 200, contentType: "text/plain", bytes: Array("done".utf8)))
            }
        }) { server, client in
            let answer = try client.exchange(Self.get("/now"))
            XCTAssertEqual(answer.status, 200)
            XCTAssertEqual(server.hangups.count, 0)
        }
    }

    func testBodiesOverTheLimitAre413WithOrWithoutContentLength() throws {
        try withServer({ $0.maxBodyBytes = 1000 }, handler: { _ in .now(Response(status: 200)) }) { _, client in
            let declared = try client.exchange(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n".utf8))
            XCTAssertEqual(declared.status, 413)
            var chunked = Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".utf8)
            for _ in 0..<3 { chunked += Array("400\r\n".utf8) + [UInt8](repeating: 0x61, count: 1024) + Array("\r\n".utf8) }
            chunked += Array("0\r\n\r\n".utf8)
            XCTAssertEqual(try client.exchange(chunked).status, 413)
            let ambiguous = try client.exchange(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab".utf8))
            XCTAssertEqual(ambiguous.status, 400)
        }
    }

    func testLargeBodiesArriveSpooledToAFile() throws {
        let seen = Locked<(memory: Int, file: Int, path: String?)>((0, 0, nil))
        try withServer({ $0.spoolThreshold = 1000 }, handler: { request in
            seen.set((request.body.count, request.bodyFile?.size ?? 0, request.bodyFile?.path))
            let bytes = (try? request.bodyBytes()) ?? []
            return .now(Response(status: 200, contentType: "text/plain", bytes: Array("\(bytes.count) \(bytes.allSatisfy { $0 == 0x62 })".utf8)))
        }) { _, client in
            let body = [UInt8](repeating: 0x62, count: 50_000)
            let answer = try client.exchange(Array("POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
            XCTAssertTrue(answer.text.hasSuffix("50000 true"), answer.text)
            XCTAssertEqual(seen.get().memory, 0)
            XCTAssertEqual(seen.get().file, 50_000)
            // The spool file goes with the request.
            Thread.sleep(forTimeInterval: 0.2)
            XCTAssertFalse(FileManager.default.fileExists(atPath: seen.get().path ?? "/"))
        }
    }

    func testSuspendedRequestsAre503AtShutdown() throws {
        var settings = Server.Settings()
        settings.port = 0
        let server = Server(settings: settings, handler: { _ in .later { _ in } }) { _ in Response(status: 503) }
        try server.start()
        let client = RawClient(port: server.port)
        let fd = try client.connect()
        defer { close(fd) }
        try client.send(fd, Self.get("/never"))
        Thread.sleep(forTimeInterval: 0.2)
        let stopper = Thread { server.stop() }
        stopper.start()
        XCTAssertEqual(client.read(fd, timeout: 5, until: { $0.status != nil }).status, 503)
    }

    /// Spans of a file appended to a stream go out in their place between
    /// the written bytes, read from the file (which may be closed and
    /// removed by then: the stream keeps its own descriptor).
    func testAFileAppendedToAStreamIsSentInItsPlace() throws {
        let path = NSTemporaryDirectory() + "appended-\(UUID().uuidString)"
        let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(content).write(to: URL(fileURLWithPath: path))
        try withServer(handler: { _ in
            .later { responder in
                let body = try! BodyStream(spoolDirectory: NSTemporaryDirectory())
                responder.send(Response(status: 200, headers: [("Content-Type", "application/octet-stream")], body: .stream(body)))
                let fd = open(path, O_RDONLY)
                unlink(path)
                try! body.write(Array("head".utf8))
                try! body.append(file: fd, offset: 5, count: 200_000)
                try! body.append(file: fd, offset: 0, count: 3)
                close(fd)
                try! body.write(Array("tail".utf8))
                body.finish()
            }
        }) { _, client in
            let answer = try Probe.parse(try client.exchange(Self.get("/file")))
            XCTAssertEqual(answer.body, Array("head".utf8) + content[5..<200_005] + content[0..<3] + Array("tail".utf8))
        }
    }

    func testAPacedStreamStopsAheadOfASlowReaderAndSeesItLeave() throws {
        let stream = Locked<BodyStream?>(nil)
        let writes = Locked(0)
        let chunk = [UInt8](repeating: 0x7A, count: 64 * 1024)
        try withServer(handler: { _ in
            .later { responder in
                let body = try! BodyStream(spoolDirectory: NSTemporaryDirectory())
                stream.set(body)
                let round: @Sendable () -> Void = {
                    DispatchQueue.global().async {
                        repeat {
                            do { try body.write(chunk) } catch { return }
                            writes.update { $0 += 1 }
                        } while body.wantsMore()
                    }
                }
                body.pace(readAhead: 256 * 1024, round)
                responder.send(Response(status: 200, headers: [("Content-Type", "application/octet-stream")], body: .stream(body)))
                round()
            }
        }) { _, client in
            let fd = try client.connect()
            try client.send(fd, Self.get("/stream"))
            let first = client.read(fd, timeout: 5, until: { $0.count > 100 * 1024 })
            XCTAssertEqual(first.status, 200)
            Thread.sleep(forTimeInterval: 0.5)
            // The maker stopped a bounded way ahead: it is not writing on and on.
            let before = writes.get()
            Thread.sleep(forTimeInterval: 0.3)
            XCTAssertEqual(writes.get(), before, "the maker went on while nobody read")
            // Reading on makes it go on (past what the kernel's socket buffers held).
            let more = client.read(fd, timeout: 10, until: { $0.count > 24 << 20 })
            XCTAssertGreaterThan(more.count, 24 << 20)
            XCTAssertGreaterThan(writes.get(), before)
            close(fd)
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline && stream.get()?.isCancelled != true { Thread.sleep(forTimeInterval: 0.05) }
            XCTAssertEqual(stream.get()?.isCancelled, true, "a client that leaves cancels the stream")
            XCTAssertThrowsError(try stream.get()?.write(chunk))
        }
    }
}

/// A value shared between a test and its handlers.
final class Locked<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ new: T) { lock.lock(); value = new; lock.unlock() }
    func update(_ change: (inout T) -> Void) { lock.lock(); change(&value); lock.unlock() }
}
