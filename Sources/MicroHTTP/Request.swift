// SPDX-License-Identifier: Apache-2.0
import Text

/// One HTTP request, read whole (bodies are collected up to the server's limit).
public struct Request: Sendable {
    public var method: String
    /// The decoded path, without the query.
    public var path: String
    /// Query arguments in order, decoded; a key without `=` has an empty value.
    public var query: [(name: String, value: String)]
    /// Header values by lower-cased name.
    public var headers: [String: String]
    /// The body, when it was small enough to keep in memory.
    public var body: [UInt8]
    /// The body, when it was larger than the server's spool threshold: a
    /// file, never whole in memory (`body` is then empty).
    public var bodyFile: SpooledBody?

    public init(method: String, path: String, query: [(name: String, value: String)] = [],
                headers: [String: String] = [:], body: [UInt8] = [], bodyFile: SpooledBody? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.bodyFile = bodyFile
    }

    /// The whole body in memory, wherever it was kept.
    public func bodyBytes() throws -> [UInt8] {
        try bodyFile?.readAll() ?? body
    }

    public var hasBody: Bool { !body.isEmpty || (bodyFile?.size ?? 0) > 0 }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    public func queryValue(_ name: String) -> String? {
        query.first(where: { $0.name == name })?.value
    }

    /// The media type of the body, without parameters, lower-cased.
    public var mediaType: String? {
        guard let value = headers["content-type"] else { return nil }
        // (Asked of every request with a body: ASCII, the rule, is read as bytes.)
        if value.utf8.allSatisfy({ $0 < 0x80 }) {
            var bytes = Array(value.utf8.prefix { $0 != UInt8(ascii: ";") })
            while bytes.last == 0x20 || bytes.last == 0x09 { bytes.removeLast() }
            let start = bytes.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? bytes.endIndex
            return String(decoding: bytes[start...].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        let type = value.firstIndex(of: ";").map { value[..<$0] } ?? value[...]
        return type.trimmingSpaces().lowercased()
    }
}
