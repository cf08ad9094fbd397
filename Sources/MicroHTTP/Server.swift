// SPDX-License-Identifier: Apache-2.0
import CMicroHTTPD
import Dispatch
import FileSystem
import FoundationEssentials
import Platform
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd: its request threads (an epoll thread pool) answer requests;
/// handlers that take long answer `.later`, which suspends the connection so
/// no request thread waits.
public final class Server: @unchecked Sendable {
    public struct Settings: Sendable {
        public var host = "127.0.0.1"
        public var port: UInt16 = 7464
        public var threads = max(ProcessInfo.processInfo.activeProcessorCount, 2)
        public var connectionLimit = 1024
        public var connectionTimeoutSeconds = 60
        public var connectionMemoryLimit = 32 * 1024
        public var maxBodyBytes = 512 * 1024 * 1024
        /// Bodies larger than this go to a file in `spoolDirectory` as
        /// they arrive, never whole into memory.
        public var spoolThreshold = 1 << 20
        public var spoolDirectory: String?
        /// A new connection must have sent its first request's headers
        /// within this, however slowly it trickles them.
        public var headerTimeoutSeconds = 10
        /// Most connections from one address (0: no limit).
        public var connectionsPerAddress = 0
        /// The users whose processes may connect (the owner of the peer's
        /// socket, as the kernel tells it); nil: anyone who reaches the port.
        public var peerUsers: Set<UInt32>?
        public init() {}
    }

    public typealias Handler = @Sendable (Request) -> Reply
    /// Builds the answer to a request the server refuses on its own.
    public typealias Refuse = @Sendable (Refusal) -> Response

    public let settings: Settings
    let handler: Handler
    let refuse: Refuse
    private var daemon: OpaquePointer?
    public private(set) var port: UInt16 = 0
    private let work = DispatchQueue(label: "larder.http.work", attributes: .concurrent)

    struct Live {
        var suspended: [ObjectIdentifier: ConnectionState] = [:]
        var streams: [ObjectIdentifier: BodyStream] = [:]
        var connections: [ObjectIdentifier: ConnectionRecord] = [:]
        var stopping = false
    }
    let live = Mutex(Live())
    /// Suspended requests that end when their client leaves.
    let hangups = Hangups()

    public init(settings: Settings, handler: @escaping Handler, refuse: @escaping Refuse) {
        self.settings = settings
        self.handler = handler
        self.refuse = refuse
    }

    public enum StartError: Error, CustomStringConvertible {
        case cannotListen(String)
        public var description: String {
            switch self { case .cannotListen(let why): return why }
        }
    }

    /// Binds and starts the request threads. `port` is the bound port afterwards (useful with port 0).
    public func start() throws {
        var s = larder_mhd_settings()
        let host = settings.host == "localhost" ? "127.0.0.1" : settings.host
        let daemon: OpaquePointer? = host.withCString { hostPointer in
            s.host = hostPointer
            s.port = settings.port
            s.threads = UInt32(settings.threads)
            s.connection_limit = UInt32(settings.connectionLimit)
            s.connection_timeout_seconds = UInt32(settings.connectionTimeoutSeconds)
            s.connection_memory_limit = settings.connectionMemoryLimit
            s.listen_backlog = 1024
            s.per_ip_connection_limit = UInt32(settings.connectionsPerAddress)
            // epoll is Linux's; libmicrohttpd's poll(2) mode is its portable one (what it offers on Darwin).
            s.portable = Syscalls.portable ? 1 : 0
            let me = Unmanaged.passUnretained(self).toOpaque()
            return larder_mhd_start(&s, accessHandler, me, requestCompleted, me, connectionNotify, me)
        }
        guard let daemon else {
            let address = host.contains(":") ? "[\(host)]:\(settings.port)" : "\(host):\(settings.port)"
            switch larder_bind_error(host, settings.port) {
            case EADDRINUSE:
                throw StartError.cannotListen("\(address) is in use (another server on that port): choose another with --port, or --port 0 for a free one")
            case EINVAL:
                throw StartError.cannotListen("cannot listen on \(address): --host must be a numeric address (127.0.0.1, ::1, 0.0.0.0)")
            case EADDRNOTAVAIL:
                throw StartError.cannotListen("cannot listen on \(address): no network interface of this machine has that address")
            case EACCES:
                throw StartError.cannotListen("cannot listen on \(address): ports below 1024 need privileges; choose another with --port, or --port 0")
            case let code:
                throw StartError.cannotListen("cannot listen on \(address)" + (code == 0 ? "" : ": \(String(cString: strerror(code)))"))
            }
        }
        self.daemon = daemon
        self.port = larder_mhd_bound_port(daemon)
        Threads.start("larder-http-watch") { [self] in watchConnections() }
    }

    /// Drops suspended requests whose client left (at once), and once a
    /// second cuts connections that have not sent their first request's
    /// headers within the deadline: a client trickling a byte a second keeps
    /// libmicrohttpd's idle timeout from ever firing, and a thousand of them
    /// would hold every connection slot.
    private func watchConnections() {
        let limit = UInt64(settings.headerTimeoutSeconds) * 1_000_000_000
        var nextSweep = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        while !isStopping {
            let now = DispatchTime.now().uptimeNanoseconds
            let left = nextSweep > now ? Int32((nextSweep - now) / 1_000_000) + 1 : 0
            for context in hangups.wait(milliseconds: left) { context.clientLeft() }
            let after = DispatchTime.now().uptimeNanoseconds
            guard after >= nextSweep else { continue }
            nextSweep = after + 1_000_000_000
            live.withLock { l in
                for record in l.connections.values where !record.sentHeaders && after &- record.started > limit {
                    // The descriptor stays open (libmicrohttpd closes it); it
                    // reads end-of-file and the connection is dropped.
                    shutdown(record.descriptor, Int32(SHUT_RDWR))
                    record.sentHeaders = true
                }
            }
        }
    }

    func connectionEvent(_ connection: OpaquePointer, _ slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>, started: Bool) {
        if started {
            let record = ConnectionRecord(descriptor: larder_mhd_connection_fd(connection), started: DispatchTime.now().uptimeNanoseconds)
            if let allowed = settings.peerUsers {
                // Once per connection: the kernel's word on who owns the other end.
                let uid = PeerUser.of(record.descriptor)
                if uid.map({ !allowed.contains($0) }) ?? true { record.refusal = .otherUser(uid: uid) }
            }
            slot.pointee = Unmanaged.passRetained(record).toOpaque()
            live.withLock { $0.connections[ObjectIdentifier(record)] = record }
        } else if let raw = slot.pointee {
            let record = Unmanaged<ConnectionRecord>.fromOpaque(raw).takeRetainedValue()
            slot.pointee = nil
            live.withLock { _ = $0.connections.removeValue(forKey: ObjectIdentifier(record)) }
        }
    }

    /// Stops gracefully: suspended requests are answered 503, streams are cut,
    /// then the daemon closes every connection.
    public func stop() {
        guard let daemon else { return }
        let (contexts, streams) = live.withLock { l -> ([ConnectionState], [BodyStream]) in
            l.stopping = true
            return (Array(l.suspended.values), Array(l.streams.values))
        }
        for context in contexts {
            context.complete(with: refuse(.shuttingDown))
        }
        for stream in streams { stream.cancel() }
        // Resumed connections must be processed before the daemon stops.
        let deadline = ContinuousClock.now + .seconds(3)
        while ContinuousClock.now < deadline, live.withLock({ !$0.suspended.isEmpty || !$0.streams.isEmpty }) {
            usleep(2_000)
        }
        MHD_stop_daemon(daemon)
        self.daemon = nil
    }

    var isStopping: Bool { live.withLock { $0.stopping } }

    // MARK: - Callbacks (called by the C trampolines in Server+Callbacks.swift)

    func access(connection: OpaquePointer, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>,
                uploadData: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
                contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        guard let raw = contextSlot.pointee else {
            // First call: only headers are known.
            let context = ConnectionState(connection: connection, server: self)
            contextSlot.pointee = Unmanaged.passRetained(context).toOpaque()
            var refusal: Refusal?
            if let record = larder_mhd_socket_context(connection) {
                let record = Unmanaged<ConnectionRecord>.fromOpaque(record).takeUnretainedValue()
                refusal = live.withLock { _ in record.sentHeaders = true; return record.refusal }
            }
            let headers = collectValues(connection, .HEADER_KIND, lowercased: true)
            context.state.withLock { $0.headers = headers }
            if let refusal = refusal.map(refuse) ?? refuseFraming(headers) {
                context.state.withLock { $0.phase = .answered }
                return queue(refusal, on: connection)
            }
            return .YES
        }
        let context = Unmanaged<ConnectionState>.fromOpaque(raw).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            let count = uploadSize.pointee
            if let uploadData { receive(UnsafeRawBufferPointer(start: uploadData, count: count), into: context) }
            uploadSize.pointee = 0
            return .YES
        }
        if let response = context.takePending() {
            live.withLock { _ = $0.suspended.removeValue(forKey: ObjectIdentifier(context)) }
            return queue(response, on: connection)
        }
        let (phase, tooLarge, failure, headers, body, spool) = context.state.withLock { s in
            defer { s.body = []; s.spool = nil }
            return (s.phase, s.tooLarge, s.spoolFailure, s.headers, s.body, s.spool)
        }
        guard phase == .reading else { return .YES }
        if tooLarge {
            context.state.withLock { $0.phase = .answered }
            return queue(refuse(.payloadTooLarge(declared: nil, limit: settings.maxBodyBytes)), on: connection)
        }
        if let failure {
            context.state.withLock { $0.phase = .answered }
            return queue(refuse(.bodyNotKept(failure)), on: connection)
        }
        if isStopping {
            context.state.withLock { $0.phase = .answered }
            return queue(refuse(.shuttingDown), on: connection)
        }
        let request = Request(method: String(cString: method), path: String(cString: url),
                              query: collectValues(connection, .GET_ARGUMENT_KIND, lowercased: false),
                              headers: Dictionary(headers, uniquingKeysWith: { a, b in a + ", " + b }),
                              body: body, bodyFile: spool?.finish())
        switch handler(request) {
        case .now(let response):
            context.state.withLock { $0.phase = .answered }
            return queue(response, on: connection)
        case .later(let work):
            context.state.withLock { $0.phase = .suspended }
            live.withLock { $0.suspended[ObjectIdentifier(context)] = context }
            MHD_suspend_connection(connection)
            let responder = Responder(context: context)
            self.work.async { work(responder) }
            return .YES
        }
    }

    /// A body chunk: kept in memory up to the spool threshold, then in a file.
    private func receive(_ chunk: UnsafeRawBufferPointer, into context: ConnectionState) {
        context.state.withLock { s in
            guard !s.tooLarge, s.spoolFailure == nil else { return }
            s.received += chunk.count
            if s.received > settings.maxBodyBytes {
                s.tooLarge = true
                s.body = []
                s.spool = nil
                return
            }
            do {
                if s.spool == nil, let directory = settings.spoolDirectory, s.body.count + chunk.count > settings.spoolThreshold {
                    let spool = try Spool(directory: directory)
                    try s.body.withUnsafeBytes { try spool.write($0) }
                    s.body = []
                    s.spool = spool
                }
                if let spool = s.spool { try spool.write(chunk) } else { s.body.append(contentsOf: chunk) }
            } catch {
                s.spoolFailure = error as? FileSystem.Failure
                s.spool = nil
                s.body = []
            }
        }
    }

    /// Requests whose length is ambiguous (two `Content-Length` headers, or
    /// one beside `Transfer-Encoding`) are refused: a proxy in front might
    /// read them otherwise (request smuggling).
    private func refuseFraming(_ headers: [(String, String)]) -> Response? {
        let lengths = headers.filter { $0.0 == "content-length" }
        if let declared = lengths.first.flatMap({ Int($0.1) }), declared > settings.maxBodyBytes {
            return refuse(.payloadTooLarge(declared: declared, limit: settings.maxBodyBytes))
        }
        if lengths.count > 1 {
            return refuse(.ambiguousLength("more than one Content-Length header"))
        }
        if !lengths.isEmpty && headers.contains(where: { $0.0 == "transfer-encoding" }) {
            return refuse(.ambiguousLength("Content-Length together with Transfer-Encoding"))
        }
        return nil
    }

    func completed(contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        guard let slot = contextSlot, let raw = slot.pointee else { return }
        let context = Unmanaged<ConnectionState>.fromOpaque(raw).takeRetainedValue()
        hangups.forget(context)
        live.withLock { _ = $0.suspended.removeValue(forKey: ObjectIdentifier(context)) }
        slot.pointee = nil
    }

    func streamFinished(_ binding: StreamBinding) {
        binding.stream.cancel()
        live.withLock { _ = $0.streams.removeValue(forKey: ObjectIdentifier(binding.stream)) }
    }

    private func collectValues(_ connection: OpaquePointer, _ kind: MHD_ValueKind, lowercased: Bool) -> [(String, String)] {
        let box = ValueCollector(lowercased: lowercased)
        MHD_get_connection_values(connection, kind, collectValue, Unmanaged.passUnretained(box).toOpaque())
        return box.values
    }

    private func queue(_ response: Response, on connection: OpaquePointer) -> MHD_Result {
        let made: OpaquePointer?
        switch response.body {
        case .bytes(let bytes) where bytes.count >= LentBytes.threshold:
            made = lend([bytes])
        case .pieces(let pieces) where pieces.reduce(0, { $0 + $1.count }) >= LentBytes.threshold:
            made = lend(pieces)
        case .pieces(let pieces):
            made = copy(Array(pieces.joined()))
        case .bytes(let bytes):
            made = copy(bytes)
        case .file(let descriptor, let size):
            made = MHD_create_response_from_fd64(size, descriptor)
        case .stream(let stream):
            let binding = StreamBinding(stream: stream, connection: connection, server: self)
            live.withLock { $0.streams[ObjectIdentifier(stream)] = stream }
            made = MHD_create_response_from_callback(UInt64.max, 64 * 1024, streamRead,
                                                     Unmanaged.passRetained(binding).toOpaque(), streamFree)
        }
        guard let mhdResponse = made else { return .NO }
        for (name, value) in response.headers {
            MHD_add_response_header(mhdResponse, name, value)
        }
        let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
        MHD_destroy_response(mhdResponse)
        return result
    }
}

extension Server {
    /// A small body, copied by MHD (one copy costs less than lending it).
    fileprivate func copy(_ bytes: [UInt8]) -> OpaquePointer? {
        bytes.withUnsafeBytes { buffer in
            MHD_create_response_from_buffer(buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), .RESPMEM_MUST_COPY)
        }
    }

    /// A large body (a listing of thousands) lent to MHD, not copied: as an
    /// I/O vector of its pieces, which stay alive, unchanged, until MHD is
    /// done with them (`lentBytesFree`).
    fileprivate func lend(_ pieces: [[UInt8]]) -> OpaquePointer? {
        let lent = Unmanaged.passRetained(LentBytes(pieces.filter { !$0.isEmpty }))
        // (An array kept alive and never changed keeps its storage where it is.)
        let vector = lent.takeUnretainedValue().pieces.map { piece in
            piece.withUnsafeBytes { MHD_IoVec(iov_base: $0.baseAddress, iov_len: $0.count) }
        }
        let made = MHD_create_response_from_iovec(vector, UInt32(vector.count), lentBytesFree, lent.toOpaque())
        if made == nil { lent.release() }
        return made
    }
}

/// A body's pieces kept alive while MHD sends them (`lentBytesFree` lets go).
final class LentBytes {
    /// Smaller bodies are copied: one copy costs less than this object.
    static let threshold = 64 * 1024
    let pieces: [[UInt8]]
    init(_ pieces: [[UInt8]]) { self.pieces = pieces }
}

final class ValueCollector {
    let lowercased: Bool
    var values: [(String, String)] = []
    init(lowercased: Bool) { self.lowercased = lowercased }
}
