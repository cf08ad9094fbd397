// SPDX-License-Identifier: Apache-2.0
extension JSONValue {
    /// Compact UTF-8 JSON.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out, indent: nil, level: 0)
        return out
    }

    /// Indented JSON for files people read.
    public func prettySerialized() -> [UInt8] {
        var out: [UInt8] = []
        write(to: &out, indent: 2, level: 0)
        out.append(0x0A)
        return out
    }

    public var jsonText: String { String(decoding: serialized(), as: UTF8.self) }

    private func newline(_ out: inout [UInt8], _ indent: Int?, _ level: Int) {
        guard let indent else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: indent * level))
    }

    func write(to out: inout [UInt8], indent: Int?, level: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let v): JSONValue.writeInteger(v, to: &out)
        case .double(let d): JSONValue.writeDouble(d, to: &out)
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent, level + 1)
                item.write(to: &out, indent: indent, level: level + 1)
            }
            if !items.isEmpty { newline(&out, indent, level) }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent, level + 1)
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(0x20) }
                value.write(to: &out, indent: indent, level: level + 1)
            }
            if !members.isEmpty { newline(&out, indent, level) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A number with a fraction (a whole one keeps its `.0`); not a number is null.
    static func writeDouble(_ d: Double, to out: inout [UInt8]) {
        if d.isFinite {
            if d == d.rounded(), abs(d) < 1e15 { writeInteger(Int64(d), to: &out); out.append(contentsOf: ".0".utf8) }
            else { out.append(contentsOf: "\(d)".utf8) }
        } else {
            out.append(contentsOf: "null".utf8)
        }
    }

    /// The decimal digits of `value`, written in place.
    static func writeInteger(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        let start = out.count
        repeat {
            out.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        out[start...].reverse()
    }

    /// How many bytes `writeString` writes for `s`, quotes and escapes
    /// included (a control character takes six), without writing them.
    static func encodedLength(ofString s: String) -> Int {
        var n = 2
        for byte in s.utf8 {
            switch byte {
            case 0x22, 0x5C, 0x0A, 0x0D, 0x09: n += 2
            case 0..<0x20: n += 6
            default: n += 1
            }
        }
        return n
    }

    /// A JSON string: runs of bytes that need no escape are copied whole.
    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        writeEscaped(s, to: &out)
        out.append(0x22)
    }

    /// What goes between a JSON string's quotes. Eight bytes are looked at
    /// a time: most strings need no escape and are copied whole.
    static func writeEscaped(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeEscaped($0, to: &out) }
    }

    /// `writeEscaped` of UTF-8 bytes.
    static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        var start = 0, at = 0
        let count = bytes.count
        while at < count {
            // Whole words without a control character, a quote or a backslash go by at once.
            if at + 8 <= count {
                let word = UnsafeRawPointer(bytes.baseAddress! + at).loadUnaligned(as: UInt64.self)
                if !needsEscape(word) {
                    at += 8
                    continue
                }
            }
            let byte = bytes[at]
            guard byte < 0x20 || byte == 0x22 || byte == 0x5C else {
                at += 1
                continue
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<at]))
            switch byte {
            case 0x22, 0x5C: out.append(0x5C); out.append(byte)
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            default:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            }
            at += 1
            start = at
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<count]))
    }

    /// Whether any byte of `word` is below 0x20, a quote or a backslash (a
    /// false yes is possible, never a false no: the bytes are then looked at one by one).
    private static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ v: UInt64) -> Bool { (v &- ones) & ~v & highs != 0 }
        let control = (word &- 0x2020_2020_2020_2020) & ~word & highs != 0
        return control || hasZero(word ^ (0x22 &* ones)) || hasZero(word ^ (0x5C &* ones))
    }
}
