// SPDX-License-Identifier: Apache-2.0
/// Standard base64 (RFC 4648, with padding), appended to a byte buffer
/// without making a string first: a query's BLOBs go straight into its answer.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` in standard base64, with padding.
    public static func string(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        bytes.withUnsafeBytes { append($0, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    static func append(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        var i = 0
        let n = bytes.count
        while i + 3 <= n {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            out.append(alphabet[Int(v & 63)])
            i += 3
        }
        if n - i == 1 {
            let v = UInt32(bytes[i]) << 16
            out += [alphabet[Int(v >> 18 & 63)], alphabet[Int(v >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if n - i == 2 {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(v >> 18 & 63)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)], UInt8(ascii: "=")]
        }
    }
}
