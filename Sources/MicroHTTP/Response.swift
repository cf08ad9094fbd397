// SPDX-License-Identifier: Apache-2.0
/// An HTTP answer. The body is either bytes in memory (in one piece or
/// several), a stream fed by a producer on another thread, or an open file
/// descriptor that the server sends and then closes.
public struct Response: Sendable {
    public enum Body: Sendable {
        case bytes([UInt8])
        /// Pieces sent one after another, never joined: lent to
        /// libmicrohttpd as an I/O vector (a listing written on every core).
        case pieces([[UInt8]])
        case stream(BodyStream)
        /// An open descriptor and the number of bytes to send from offset 0;
        /// the server owns and closes it.
        case file(descriptor: Int32, size: UInt64)
    }

    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Body
    /// The contract's error code of an error answer, for the access log (not sent).
    public var errorCode: String?

    public init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public init(status: Int, contentType: String, bytes: [UInt8]) {
        self.init(status: status, headers: [("Content-Type", contentType)], body: .bytes(bytes))
    }

    /// The body's bytes when it is in memory (pieces joined), else nil.
    public var bodyBytes: [UInt8]? {
        switch body {
        case .bytes(let bytes): return bytes
        case .pieces(let pieces): return Array(pieces.joined())
        case .stream, .file: return nil
        }
    }

    public mutating func addHeader(_ name: String, _ value: String) {
        headers.append((name, value))
    }
}

/// What a handler gives back: an answer now, or work that answers later from
/// another thread while the connection is suspended (no request thread is held).
public enum Reply: Sendable {
    case now(Response)
    case later(@Sendable (Responder) -> Void)
}
