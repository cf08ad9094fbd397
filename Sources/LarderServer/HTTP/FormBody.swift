// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// A request's `application/x-www-form-urlencoded` body, as an HTML form
/// posts it: `name=value` pairs joined by `&`, percent-encoded, `+` for a
/// space. Small by nature, so anything over `maxBytes` is refused; unknown
/// and repeated fields, broken escapes and text that is not UTF-8 are 400s
/// that say what is wrong.
struct FormBody {
    static let mediaType = "application/x-www-form-urlencoded"
    /// Room for the longest token (1024 characters of four UTF-8 bytes, each byte
    /// percent-encoded) with its name.
    static let maxBytes = 16 * 1024

    let fields: [(name: String, value: String)]

    init(_ request: Request, _ description: BodyFields) throws {
        let allowed = description.names
        let size = request.bodyFile?.size ?? request.body.count
        guard size <= FormBody.maxBytes else {
            throw LarderError(.payloadTooLarge, "a form body is at most \(FormBody.maxBytes) bytes; this one is \(size)",
                              details: [("limit_bytes", .int(Int64(FormBody.maxBytes)))])
        }
        if let type = request.mediaType, type != FormBody.mediaType {
            throw LarderError(.unsupportedMediaType, "send a form (Content-Type: \(FormBody.mediaType)), not \(type)",
                              details: [("content_type", .string(type))])
        }
        guard request.hasBody else {
            fields = []
            return
        }
        if request.mediaType == nil {
            throw LarderError(.unsupportedMediaType, "send a form (Content-Type: \(FormBody.mediaType))")
        }
        var fields: [(name: String, value: String)] = []
        for pair in try request.bodyBytes().split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let name = try FormBody.decode(parts[0], what: "a field name")
            let value = try parts.count > 1 ? FormBody.decode(parts[1], what: "field '\(name)'") : ""
            guard allowed.contains(name) else {
                throw LarderError(.badRequest, "unknown form field '\(name)'; known fields: \(allowed.sorted().joined(separator: ", "))",
                                  details: [("field", .string(name))])
            }
            guard !fields.contains(where: { $0.name == name }) else {
                throw LarderError(.badRequest, "form field '\(name)' is given twice", details: [("field", .string(name))])
            }
            fields.append((name, value))
        }
        self.fields = fields
    }

    func value(_ name: String) -> String? { fields.first { $0.name == name }?.value }

    /// Percent-decoding with `+` as a space; the bytes must be UTF-8.
    static func decode(_ encoded: ArraySlice<UInt8>, what: String) throws -> String {
        func hexDigit(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(encoded.count)
        var i = encoded.startIndex
        while i < encoded.endIndex {
            let c = encoded[i]
            if c == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if c == UInt8(ascii: "%") {
                guard i + 2 < encoded.endIndex, let high = hexDigit(encoded[i + 1]), let low = hexDigit(encoded[i + 2]) else {
                    throw LarderError(.badRequest, "\(what) has a '%' that is not followed by two hex digits")
                }
                bytes.append(high << 4 | low)
                i += 2
            } else {
                bytes.append(c)
            }
            i += 1
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.utf8.elementsEqual(bytes) else {
            throw LarderError(.badRequest, "\(what) is not UTF-8 text once percent-decoded")
        }
        return text
    }
}
