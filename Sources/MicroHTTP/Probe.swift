// SPDX-License-Identifier: Apache-2.0
import Platform

/// One plain-HTTP GET with a deadline on all of it (name lookup aside), for
/// `larder health`: container health checks and CI wait loops run it where
/// curl may not exist. Not a general client: HTTP/1.1, `Connection: close`,
/// an answer read to its end, at most 1 MiB.
public enum Probe {
    public struct Answer: Sendable {
        public var status: Int
        public var body: [UInt8]
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// GETs `path` under `base` (`http://host[:port][/prefix]`) within `timeoutMs`.
    public static func get(_ base: String, path: String, timeoutMs: Int) throws -> Answer {
        let target = try Target(base)
        let deadline = Deadline(milliseconds: timeoutMs)
        let fd = try connect(target, deadline)
        defer { close(fd) }
        let request = "GET \(target.prefix)\(path) HTTP/1.1\r\nHost: \(target.hostHeader)\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
        try send(Array(request.utf8), to: fd, deadline)
        return try parse(receive(from: fd, deadline))
    }

    /// `http://host:port/prefix`, split.
    struct Target {
        var host: String
        var port: String
        var prefix: String
        var hostHeader: String

        init(_ url: String) throws {
            guard url.hasPrefix("http://") else {
                throw Failure("'\(url)' is not an http:// URL" + (url.hasPrefix("https://") ? " (probe the server's own plain-http address)" : ""))
            }
            let rest = url.dropFirst(7)
            let authority = rest.prefix { $0 != "/" }
            var prefix = String(rest.dropFirst(authority.count))
            while prefix.hasSuffix("/") { prefix.removeLast() }
            self.prefix = prefix
            hostHeader = String(authority)
            if authority.hasPrefix("[") { // [::1]:7464
                guard let close = authority.firstIndex(of: "]") else { throw Failure("'\(url)': unclosed '['") }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                port = after.hasPrefix(":") ? String(after.dropFirst()) : "80"
            } else if let colon = authority.lastIndex(of: ":") {
                host = String(authority[..<colon])
                port = String(authority[authority.index(after: colon)...])
            } else {
                host = String(authority)
                port = "80"
            }
            guard !host.isEmpty, let number = Int(port), (1...65535).contains(number) else { throw Failure("'\(url)': no host, or a bad port") }
        }
    }

    struct Deadline {
        let end: Double
        init(milliseconds: Int) { end = Deadline.now() + Double(milliseconds) }
        static func now() -> Double {
            var t = timespec()
            clock_gettime(CLOCK_MONOTONIC, &t)
            return Double(t.tv_sec) * 1000 + Double(t.tv_nsec) / 1e6
        }
        var remaining: Int32 { Int32(max(0, end - Deadline.now()).rounded(.up)) }
    }

    /// Waits for `events` on `fd`, or throws once the deadline passes.
    private static func waitFor(_ fd: Int32, _ events: Int32, _ deadline: Deadline, _ what: String) throws {
        while true {
            let left = deadline.remaining
            guard left > 0 else { throw Failure("timed out \(what)") }
            var p = pollfd(fd: fd, events: Int16(events), revents: 0)
            let n = poll(&p, 1, left)
            if n > 0 { return }
            if n < 0 && errno != EINTR { throw Failure("\(what): \(String(cString: strerror(errno)))") }
        }
    }

    /// The first address of `target` that accepts a connection.
    private static func connect(_ target: Target, _ deadline: Deadline) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(target.host, target.port, &hints, &list)
        guard rc == 0, let first = list else { throw Failure("cannot resolve '\(target.host)': \(String(cString: gai_strerror(rc)))") }
        defer { freeaddrinfo(first) }
        var lastError = "no address"
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next {
            next = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.pointee.ai_protocol)
            guard fd >= 0 else { lastError = String(cString: strerror(errno)); continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            if Platform.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return fd }
            if errno == EINPROGRESS {
                do {
                    try waitFor(fd, Int32(POLLOUT), deadline, "connecting to \(target.hostHeader)")
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    if error == 0 { return fd }
                    lastError = String(cString: strerror(error))
                } catch let failure as Failure {
                    close(fd)
                    throw failure
                }
            } else {
                lastError = String(cString: strerror(errno))
            }
            close(fd)
        }
        throw Failure("cannot connect to \(target.hostHeader): \(lastError)")
    }

    private static func send(_ bytes: [UInt8], to fd: Int32, _ deadline: Deadline) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Platform.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { try waitFor(fd, Int32(POLLOUT), deadline, "sending"); continue }
            throw Failure("cannot send: \(String(cString: strerror(errno)))")
        }
    }

    private static let maxBytes = 1 << 20

    private static func receive(from fd: Int32, _ deadline: Deadline) throws -> [UInt8] {
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return answer }
            if n > 0 {
                answer += buffer[0..<n]
                guard answer.count <= maxBytes else { throw Failure("the answer is larger than \(maxBytes) bytes") }
                continue
            }
            if errno == EAGAIN || errno == EINTR { try waitFor(fd, Int32(POLLIN), deadline, "waiting for the answer"); continue }
            throw Failure("cannot read the answer: \(String(cString: strerror(errno)))")
        }
    }

    /// Status line, headers, body (chunked or not).
    static func parse(_ bytes: [UInt8]) throws -> Answer {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.firstRange(of: separator) else { throw Failure("not an HTTP answer (no end of headers)") }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let status = lines.first?.split(separator: " ", maxSplits: 2)
        guard let status, status.count >= 2, status[0].hasPrefix("HTTP/1."), let code = Int(status[1]) else {
            throw Failure("not an HTTP answer: '\(lines.first ?? "")'")
        }
        let body = Array(bytes[end.upperBound...])
        let chunked = lines.dropFirst().contains { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            return parts.count == 2 && parts[0].lowercased() == "transfer-encoding" && parts[1].lowercased().contains("chunked")
        }
        return Answer(status: code, body: chunked ? try dechunk(body) : body)
    }

    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        var at = 0
        let lineEnd: [UInt8] = [13, 10]
        while let range = bytes[at...].firstRange(of: lineEnd) {
            let sizeText = String(decoding: bytes[at..<range.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.filter { $0 != " " }, radix: 16) else { throw Failure("bad chunk size") }
            if size == 0 { return out }
            let start = range.upperBound
            guard start + size <= bytes.count else { throw Failure("the answer ended inside a chunk") }
            out += bytes[start..<(start + size)]
            at = start + size + 2
            guard at <= bytes.count else { throw Failure("the answer ended inside a chunk") }
        }
        throw Failure("the answer ended inside a chunk")
    }
}
