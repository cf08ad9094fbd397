// SPDX-License-Identifier: Apache-2.0
/// Whether a host is a loopback address, read as an address: `localhost`,
/// an IPv4 literal in 127.0.0.0/8 (four decimal parts, as `inet_pton`
/// reads them), `::1` however it is written, or `::ffff:127.x.y.z`. A DNS
/// name that merely starts with `127.` (`127.0.0.1.attacker.example`) is
/// not one: it can resolve anywhere.
public enum Loopback {
    public static func contains(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" { return true }
        if let v4 = ipv4(h) { return v4.0 == 127 }
        guard let v6 = ipv6(h) else { return false }
        if v6.dropLast().allSatisfy({ $0 == 0 }) && v6.last == 1 { return true }
        // An IPv4-mapped address of the loopback network.
        return v6.prefix(5).allSatisfy { $0 == 0 } && v6[5] == 0xFFFF && v6[6] >> 8 == 127
    }

    /// `a.b.c.d`, each 0...255 in decimal: the four bytes.
    static func ipv4(_ text: String) -> (UInt8, UInt8, UInt8, UInt8)? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }), let value = UInt8(part) else { return nil }
            bytes.append(value)
        }
        return (bytes[0], bytes[1], bytes[2], bytes[3])
    }

    /// An IPv6 literal (with `::`, and a dotted IPv4 tail): its eight groups.
    static func ipv6(_ text: String) -> [UInt16]? {
        guard text.contains(":") else { return nil }
        func groups(_ part: Substring) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, piece) in pieces.enumerated() {
                if i == pieces.count - 1, piece.contains("."), let v4 = ipv4(String(piece)) {
                    out += [UInt16(v4.0) << 8 | UInt16(v4.1), UInt16(v4.2) << 8 | UInt16(v4.3)]
                } else {
                    guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                    out.append(value)
                }
            }
            return out
        }
        let halves = text.components(separatedBy: "::")
        switch halves.count {
        case 1:
            guard let all = groups(Substring(text)), all.count == 8 else { return nil }
            return all
        case 2:
            guard let head = groups(Substring(halves[0])), let tail = groups(Substring(halves[1])), head.count + tail.count < 8 else { return nil }
            return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        default:
            return nil
        }
    }
}
