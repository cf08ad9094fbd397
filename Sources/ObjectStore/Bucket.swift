// SPDX-License-Identifier: Apache-2.0
import CCurl
import Digest
import Platform
import Synchronization

/// `s3://BUCKET/PREFIX`: a bucket and the folder of it that is Larder's.
/// Bucket and prefix are kept to `A-Z a-z 0-9 . _ / -`, so an object's
/// name never needs escaping and reads the same in every tool.
public struct BucketURL: Sendable, Equatable, CustomStringConvertible {
    public let bucket: String
    /// Without a leading or trailing slash; empty for the bucket's top.
    public let prefix: String

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public init(_ text: String) throws {
        guard text.hasPrefix("s3://") else { throw Invalid(description: "'\(text)' is not an s3://BUCKET/PREFIX URL") }
        let rest = text.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        // Keys belong in the environment (AWS_ACCESS_KEY_ID ...), never in a URL that /health and logs show.
        guard !bucket.contains("@"), !bucket.contains(":") else {
            throw Invalid(description: "the URL '\(BucketURL.redacted(text))' carries credentials or a port: name the bucket alone, with the keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY and the server in AWS_ENDPOINT_URL")
        }
        guard (3...63).contains(bucket.utf8.count), bucket.utf8.allSatisfy(BucketURL.isNameByte), !bucket.contains("/") else {
            throw Invalid(description: "'\(bucket)' is not a bucket name (3 to 63 of a-z 0-9 . -)")
        }
        let prefix = rest.dropFirst(bucket.count).split(separator: "/").joined(separator: "/")
        guard prefix.utf8.allSatisfy(BucketURL.isNameByte), prefix.utf8.count <= 512, !prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
            throw Invalid(description: "the prefix '\(prefix)' may hold only A-Z a-z 0-9 . _ - and /")
        }
        self.bucket = bucket
        self.prefix = prefix
    }

    public var description: String { "s3://" + bucket + (prefix.isEmpty ? "" : "/" + prefix) }

    /// The object `name` (relative to the prefix) as the bucket names it.
    public func key(_ name: String) -> String { prefix.isEmpty ? name : prefix + "/" + name }

    public static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b == 0x2e || b == 0x5f || b == 0x2d || b == 0x2f
    }

    /// `text` with what is before an `@` hidden.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        return "s3://…" + text[at...]
    }
}

/// Where the bucket is served and who asks, from the environment the AWS
/// tools read: keys, a session token, the region, and an endpoint for
/// MinIO-like servers (addressed path-style).
public struct BucketAccess: Sendable {
    public var accessKey: String?
    public var secretKey: String?
    public var sessionToken: String?
    public var region: String
    /// `http(s)://host[:port]` without a trailing slash; nil for AWS itself.
    public var endpoint: String?

    public init(accessKey: String? = nil, secretKey: String? = nil, sessionToken: String? = nil, region: String = "us-east-1", endpoint: String? = nil) {
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.sessionToken = sessionToken
        self.region = region
        self.endpoint = endpoint
    }

    /// Whether requests are signed (both keys given); otherwise they go anonymous.
    public var isSigned: Bool { accessKey != nil && secretKey != nil }

    public static func fromEnvironment(_ environment: [String: String]) -> BucketAccess {
        func value(_ names: String...) -> String? { names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty } }
        var endpoint = value("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
        while endpoint?.hasSuffix("/") == true { endpoint?.removeLast() }
        return BucketAccess(accessKey: value("AWS_ACCESS_KEY_ID"), secretKey: value("AWS_SECRET_ACCESS_KEY"),
                            sessionToken: value("AWS_SESSION_TOKEN"), region: value("AWS_REGION", "AWS_DEFAULT_REGION") ?? "us-east-1",
                            endpoint: endpoint)
    }
}

/// Why a request to the bucket failed.
public enum BucketError: Error, CustomStringConvertible {
    /// No answer: refused, unreachable, timed out, cut off.
    case transport(String)
    /// An answer other than success (S3's error code from its XML body, when it has one).
    case status(Int, code: String?)
    /// An object larger than the reader would take.
    case tooLarge(Int64)
    case local(String)

    public var description: String {
        switch self {
        case .transport(let why): return why
        case .status(let status, let code): return "HTTP \(status)" + (code.map { " \($0)" } ?? "")
        case .tooLarge(let limit): return "the object is larger than \(limit) bytes"
        case .local(let why): return why
        }
    }

    /// Whether the bucket did not answer at all (rather than answered no).
    public var isTransport: Bool { if case .transport = self { return true } else { return false } }
}

/// One S3 bucket (or part of one) spoken to through libcurl, which signs
/// each request with AWS Signature Version 4 itself. Every request is
/// bounded: connecting and any stall end it after `timeoutMs`, and a
/// small request takes at most that long in all.
public final class Bucket: Sendable {
    public let url: BucketURL
    public let access: BucketAccess
    public let timeoutMs: Int

    /// Why libcurl cannot be used here, or nil when it can (loaded at the first bucket).
    public static var unavailable: String? {
        larder_curl_load() == 1 ? nil : "libcurl (libcurl.so.4) is not installed (Debian: apt-get install libcurl4): " + String(cString: larder_curl_missing())
    }
    /// The SHA-256 of no bytes: what a request without a body is signed with.
    static let emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public init(url: BucketURL, access: BucketAccess, timeoutMs: Int) {
        self.url = url
        self.access = access
        self.timeoutMs = timeoutMs
    }

    /// The object `name`'s bytes, or nil when there is none.
    public func get(_ name: String, maxBytes: Int) throws -> [UInt8]? {
        let sink = Sink(limit: Int64(maxBytes))
        let status = try perform("GET", name, payloadHash: Bucket.emptyPayload, sink: sink, whole: true)
        if status == 404 { return nil }
        try Bucket.check(status, sink)
        guard sink.bytes.count <= maxBytes else { throw BucketError.tooLarge(Int64(maxBytes)) }
        return sink.bytes
    }

    /// Writes the object `name` to the new file `path`; its size, or nil
    /// when there is no such object (and then no file).
    public func download(_ name: String, to path: String, maxBytes: Int64) throws -> Int64? {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BucketError.local("cannot create \(path): \(String(cString: strerror(errno)))") }
        let sink = Sink(limit: maxBytes, fd: fd)
        var kept = false
        defer {
            close(fd)
            if !kept { unlink(path) }
        }
        let status = try perform("GET", name, payloadHash: Bucket.emptyPayload, sink: sink, whole: false)
        if status == 404 { return nil }
        try Bucket.check(status, sink)
        kept = true
        return sink.written
    }

    /// Puts `bytes` as the object `name`.
    public func put(_ name: String, bytes: [UInt8], contentType: String) throws {
        let source = Source(bytes: bytes)
        let sink = Sink(limit: 1 << 16)
        let status = try perform("PUT", name, payloadHash: SHA256.hex(bytes), contentType: contentType,
                                 source: source, sink: sink, whole: true)
        try Bucket.check(status, sink)
    }

    /// Puts the file `path` as the object `name`; its size.
    @discardableResult
    public func upload(_ name: String, file path: String, contentType: String) throws -> Int64 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BucketError.local("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        // Signed with the body's hash (S3 checks it), read once before sending.
        let hash = SHA256()
        var size: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(size)) }
            guard n >= 0 else { throw BucketError.local("cannot read \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            size += Int64(n)
        }
        let source = Source(fd: fd, size: size)
        let sink = Sink(limit: 1 << 16)
        let status = try perform("PUT", name, payloadHash: hash.finalize(), contentType: contentType, source: source, sink: sink, whole: false)
        try Bucket.check(status, sink)
        return size
    }

    private static func check(_ status: Int, _ sink: Sink) throws {
        guard (200..<300).contains(status) else { throw BucketError.status(status, code: sink.errorCode) }
    }

    /// The URL of object `name`: path-style on a named endpoint, the bucket's own host on AWS.
    func address(_ name: String) -> String {
        let key = url.key(name)
        if let endpoint = access.endpoint { return endpoint + "/" + url.bucket + "/" + key }
        return "https://" + url.bucket + ".s3." + access.region + ".amazonaws.com/" + key
    }

    /// One request; answers the HTTP status. `whole`: the time limit bounds
    /// the request in all, not only connecting and stalls.
    private func perform(_ method: String, _ name: String, payloadHash: String, contentType: String? = nil,
                         source: Source? = nil, sink: Sink, whole: Bool) throws -> Int {
        if let why = Bucket.unavailable { throw BucketError.transport(why) }
        guard let curl = larder_curl_easy_init() else { throw BucketError.local("libcurl cannot start a request") }
        defer { larder_curl_easy_cleanup(curl) }
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { larder_curl_slist_free_all(headers) }
        func header(_ line: String) { headers = larder_curl_slist_append(headers, line) }
        let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        defer { errorText.deallocate() }

        let sinkPointer = Unmanaged.passUnretained(sink).toOpaque()
        _ = larder_curl_set_text(curl, CURLOPT_URL, address(name))
        _ = larder_curl_set_long(curl, CURLOPT_NOSIGNAL, 1)
        _ = larder_curl_set_pointer(curl, CURLOPT_ERRORBUFFER, errorText)
        _ = larder_curl_set_long(curl, CURLOPT_CONNECTTIMEOUT_MS, timeoutMs)
        // A stall of the limit's length ends any request; a small one is bounded in all.
        _ = larder_curl_set_long(curl, CURLOPT_LOW_SPEED_LIMIT, 1)
        _ = larder_curl_set_long(curl, CURLOPT_LOW_SPEED_TIME, max(1, (timeoutMs + 999) / 1000))
        if whole { _ = larder_curl_set_long(curl, CURLOPT_TIMEOUT_MS, timeoutMs) }
        _ = larder_curl_set_text(curl, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = larder_curl_set_callback(curl, CURLOPT_WRITEFUNCTION, Bucket.write)
        _ = larder_curl_set_pointer(curl, CURLOPT_WRITEDATA, sinkPointer)
        if method == "PUT" {
            // An upload proper: a custom PUT with post fields would go out form-encoded.
            _ = larder_curl_set_long(curl, CURLOPT_UPLOAD, 1)
            if let source {
                _ = larder_curl_set_callback(curl, CURLOPT_READFUNCTION, Bucket.read)
                _ = larder_curl_set_pointer(curl, CURLOPT_READDATA, Unmanaged.passUnretained(source).toOpaque())
                _ = larder_curl_set_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(source.size))
            }
            // (No "Expect:" header to turn 100-continue off: libcurl would sign it empty and not send it.)
        }
        if let contentType { header("Content-Type: " + contentType) }
        if let key = access.accessKey, let secret = access.secretKey {
            // Named in full: left to guess, libcurl takes the provider, region and
            // service from the host (for 127.0.0.1 it signs for a service "127").
            _ = larder_curl_set_text(curl, CURLOPT_AWS_SIGV4, "aws:amz:" + access.region + ":s3")
            _ = larder_curl_set_text(curl, CURLOPT_USERNAME, key)
            _ = larder_curl_set_text(curl, CURLOPT_PASSWORD, secret)
            // S3 wants the body's hash; libcurl signs an upload's as empty without this header.
            header("x-amz-content-sha256: " + payloadHash)
            if let token = access.sessionToken { header("x-amz-security-token: " + token) }
        }
        _ = larder_curl_set_list(curl, CURLOPT_HTTPHEADER, headers)
        let code = withExtendedLifetime((sink, source)) { larder_curl_perform(curl) }
        if let failure = sink.failure { throw BucketError.local(failure) }
        guard code == CURLE_OK else {
            if code == CURLE_WRITE_ERROR && sink.overflowed { throw BucketError.tooLarge(sink.limit) }
            let detail = String(cString: errorText)
            throw BucketError.transport(detail.isEmpty ? String(cString: larder_curl_strerror(code)) : detail)
        }
        return larder_curl_status(curl)
    }

    private static let write: larder_curl_data_callback = { data, size, count, context in
        guard let data, let context else { return 0 }
        let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
        return sink.take(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
    }

    private static let read: larder_curl_data_callback = { data, size, count, context in
        guard let data, let context else { return Int(CURL_READFUNC_ABORT) }
        let source = Unmanaged<Source>.fromOpaque(context).takeUnretainedValue()
        return source.give(UnsafeMutableRawBufferPointer(start: data, count: size * count))
    }
}

/// Where an answer's body goes: memory (small answers) or a file; stops
/// past `limit` bytes.
private final class Sink: @unchecked Sendable {
    let limit: Int64
    let fd: Int32?
    var bytes: [UInt8] = []
    var written: Int64 = 0
    var overflowed = false
    var failure: String?

    /// In memory, S3's error documents are taken up to 64 KiB whatever `limit` is.
    init(limit: Int64, fd: Int32? = nil) {
        self.limit = fd == nil ? max(limit, 1 << 16) : limit
        self.fd = fd
    }

    func take(_ chunk: UnsafeRawBufferPointer) -> Bool {
        written += Int64(chunk.count)
        guard written <= limit else { overflowed = true; return false }
        guard let fd else { bytes += chunk; return true }
        var at = 0
        while at < chunk.count {
            let n = Platform.write(fd, chunk.baseAddress! + at, chunk.count - at)
            guard n > 0 else { failure = "cannot write the download: \(String(cString: strerror(errno)))"; return false }
            at += n
        }
        // (The start is kept: an error's XML document goes here too.)
        if bytes.count < 1 << 16 { bytes += chunk.prefix((1 << 16) - bytes.count) }
        return true
    }

    /// S3's `<Code>` in an error answer.
    var errorCode: String? {
        let text = String(decoding: bytes.prefix(1 << 16), as: UTF8.self)
        guard let start = text.firstRange(of: "<Code>"), let end = text[start.upperBound...].firstRange(of: "</Code>") else { return nil }
        return String(text[start.upperBound..<end.lowerBound].prefix(80))
    }
}

/// An upload's body: bytes in memory or a file read by offset.
private final class Source: @unchecked Sendable {
    let bytes: [UInt8]
    let fd: Int32?
    let size: Int64
    var offset: Int64 = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
        fd = nil
        size = Int64(bytes.count)
    }

    init(fd: Int32, size: Int64) {
        bytes = []
        self.fd = fd
        self.size = size
    }

    func give(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = Int(min(Int64(buffer.count), size - offset))
        guard count > 0 else { return 0 }
        if let fd {
            let n = pread(fd, buffer.baseAddress, count, off_t(offset))
            guard n > 0 else { return Int(CURL_READFUNC_ABORT) }
            offset += Int64(n)
            return n
        }
        bytes.withUnsafeBytes { all in
            buffer.baseAddress!.copyMemory(from: all.baseAddress! + Int(offset), byteCount: count)
        }
        offset += Int64(count)
        return count
    }
}
