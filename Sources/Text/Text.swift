// SPDX-License-Identifier: Apache-2.0
import Platform

/// The few text helpers the server took from Foundation, whose string
/// extensions live in the part that links ICU's data into the
/// binary. They trim as Foundation's character sets do, scalar by scalar.
extension StringProtocol {
    /// Without the white space and line ends at either end
    /// (Foundation's `trimmingCharacters(in: .whitespacesAndNewlines)`).
    public func trimmed() -> String { trimming(\.isSpaceOrLineEnd) }

    /// Without the spaces and tabs at either end; line ends stay
    /// (Foundation's `trimmingCharacters(in: .whitespaces)`).
    public func trimmingSpaces() -> String { trimming(\.isSpace) }

    private func trimming(_ trimmed: (Unicode.Scalar) -> Bool) -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !trimmed($0) }),
              let last = scalars.lastIndex(where: { !trimmed($0) }) else { return "" }
        // (The common case, nothing to trim, copies nothing scalar by scalar.)
        if first == scalars.startIndex && scalars.index(after: last) == scalars.endIndex { return String(self) }
        var kept = String.UnicodeScalarView()
        kept.append(contentsOf: scalars[first...last])
        return String(kept)
    }
}

extension Unicode.Scalar {
    /// A tab, a space separator (Unicode's Zs) or the zero width space
    /// (Zs before Unicode 4.0.1): Foundation's `.whitespaces`, as Core Foundation has it.
    public var isSpace: Bool {
        // (ASCII first: the Unicode tables are a lookup per character.)
        if isASCII { return self == " " || self == "\t" }
        return self == "\u{200B}" || properties.generalCategory == .spaceSeparator
    }

    /// Also a line or paragraph separator, U+000A to U+000D and U+0085: Foundation's `.whitespacesAndNewlines`.
    public var isSpaceOrLineEnd: Bool {
        if isASCII { return self == " " || ("\t"..."\r").contains(self) }
        switch properties.generalCategory {
        case .spaceSeparator, .lineSeparator, .paragraphSeparator: return true
        default: return ("\t"..."\r").contains(self) || self == "\u{85}" || self == "\u{200B}"
        }
    }
}

/// The time now in the local time zone, as C's `strftime` writes `format`
/// ("%Y-%m-%d %H:%M:%S"); FoundationEssentials alone knows no zone but UTC.
public func localTime(_ format: String) -> String {
    var now = time(nil), local = tm()
    localtime_r(&now, &local)
    var text = [CChar](repeating: 0, count: 256)
    let count = strftime(&text, text.count, format, &local)
    return String(decoding: text.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension Double {
    /// The number with `places` digits after the point, as C's `%.Nf` writes it: 2.345 is "2.3" with 1.
    public func fixed(_ places: Int) -> String {
        var text = [CChar](repeating: 0, count: 352) // the longest double, %.17f
        let count = text.withUnsafeMutableBufferPointer { buffer in
            withVaList([self]) { vsnprintf(buffer.baseAddress, buffer.count, "%.\(max(0, min(places, 17)))f", $0) }
        }
        return String(decoding: text.prefix(Int(max(count, 0))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
