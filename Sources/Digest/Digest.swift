// SPDX-License-Identifier: Apache-2.0
import CSystem

// Checksums from the C libraries Larder links anyway: SHA-256 from
// libcrypto, CRC-32 from ISA-L (which also deflates).

/// SHA-256 (OpenSSL's libcrypto), fed in pieces.
public final class SHA256 {
    private var context: UnsafeMutableRawPointer?

    public init() { context = larder_sha256_new() }
    deinit { if context != nil { _ = finalizeBytes() } }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress { larder_sha256_update(context, base, bytes.count) }
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }
    public func update(_ text: String) { update(Array(text.utf8)) }

    private func finalizeBytes() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        out.withUnsafeMutableBufferPointer { larder_sha256_final(context, $0.baseAddress) }
        context = nil
        return out
    }

    /// The digest in lower-case hex; the object is spent afterwards.
    public func finalize() -> String { finalizeBytes().hex }

    public static func hex(_ bytes: [UInt8]) -> String {
        let h = SHA256()
        h.update(bytes)
        return h.finalize()
    }

    /// The 32 digest bytes of `bytes` (for encodings other than hex).
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        let h = SHA256()
        h.update(bytes)
        return h.finalizeBytes()
    }

}

/// SHA-384 (libcrypto): the 48 digest bytes of `bytes`.
public func sha384(_ bytes: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 48)
    bytes.withUnsafeBytes { input in out.withUnsafeMutableBufferPointer { larder_sha384(input.baseAddress, input.count, $0.baseAddress) } }
    return out
}

/// CRC-32, as zip and gzip take it (ISA-L).
public func crc32(_ bytes: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
    guard let base = bytes.baseAddress else { return initial }
    return larder_crc32(initial, base, bytes.count)
}

public func crc32(_ bytes: [UInt8], initial: UInt32 = 0) -> UInt32 {
    bytes.withUnsafeBytes { crc32($0, initial: initial) }
}

extension Array where Element == UInt8 {
    /// Lower-case hex of the bytes.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
