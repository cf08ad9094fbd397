// SPDX-License-Identifier: Apache-2.0

/// Markup as the dashboard writes it, in document order. Text and attribute
/// values always go in escaped; markup of its own comes only from literals
/// (`StaticString`), so no text read at run time can become markup.
struct HTML: Sendable {
    private(set) var bytes: [UInt8] = []

    init() {}

    /// A fragment, written by `build`.
    init(_ build: (inout HTML) throws -> Void) rethrows { try build(&self) }

    /// A fragment of text alone.
    init(text: some StringProtocol) { self.text(text) }

    /// The markup as a string.
    var markup: String { String(decoding: bytes, as: UTF8.self) }
    var byteCount: Int { bytes.count }

    // MARK: - Content

    /// Text, escaped: `&`, `<`, `>`, `"` and `'` as references.
    mutating func text(_ text: some StringProtocol) { escape(text.utf8) }
    mutating func text(_ number: some BinaryInteger) { bytes += String(number).utf8 }

    /// Markup as written: a literal in the source, never a value.
    mutating func raw(_ markup: StaticString) { markup.withUTF8Buffer { bytes += $0 } }

    /// A fragment this writer made.
    mutating func append(_ fragment: HTML) { bytes += fragment.bytes }

    /// The dashboard's own style sheet or script in its element, compiled
    /// into the binary: the one text not from a literal that goes in unescaped.
    mutating func inline(_ asset: Asset) {
        switch asset {
        case .style: raw("<style>"); bytes += Dashboard.style.utf8; raw("</style>")
        case .script: raw("<script>"); bytes += Dashboard.script.utf8; raw("</script>")
        }
    }

    enum Asset { case style, script }

    // MARK: - Elements

    /// `<name attributes>`, what `content` writes, `</name>`.
    mutating func element(_ name: StaticString, _ attributes: Attributes = [:], _ content: (inout HTML) throws -> Void) rethrows {
        open(name, attributes)
        try content(&self)
        close(name)
    }

    /// An element holding only `text`.
    mutating func element(_ name: StaticString, _ attributes: Attributes = [:], text: some StringProtocol) {
        open(name, attributes)
        self.text(text)
        close(name)
    }

    /// An element without content or end tag: `<input>`, `<meta>`.
    mutating func void(_ name: StaticString, _ attributes: Attributes = [:]) { open(name, attributes) }

    /// Attributes in the order written; a nil value leaves its attribute out.
    typealias Attributes = KeyValuePairs<StaticString, Attribute?>

    /// An attribute's value: text (`"pass"`, `"t-\(name)"`, `.text(label)`),
    /// a URL of this server, or none (`selected`).
    struct Attribute: ExpressibleByStringInterpolation, Sendable {
        fileprivate enum Value: Sendable { case text(String), url(Href), bare }
        fileprivate let value: Value

        init(stringLiteral value: String) { self.value = .text(value) }
        init(stringInterpolation: DefaultStringInterpolation) { value = .text(String(stringInterpolation: stringInterpolation)) }
        private init(_ value: Value) { self.value = value }

        static func text(_ text: String) -> Attribute { Attribute(.text(text)) }
        static func url(_ href: Href) -> Attribute { Attribute(.url(href)) }
        /// A boolean attribute, written without a value.
        static let bare = Attribute(.bare)
    }

    private mutating func open(_ name: StaticString, _ attributes: Attributes) {
        bytes.append(UInt8(ascii: "<"))
        raw(name)
        for (attribute, value) in attributes {
            guard let value else { continue }
            bytes.append(UInt8(ascii: " "))
            raw(attribute)
            switch value.value {
            case .bare: continue
            case .text(let text):
                // A URL attribute takes an `Href`, whose variable parts are percent-encoded.
                assert(!["href", "src", "action"].contains(attribute.description), "\(attribute) takes .url")
                raw("=\"")
                escape(text.utf8)
            case .url(let href):
                raw("=\"")
                escape(href.text.utf8)
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: ">"))
    }

    private mutating func close(_ name: StaticString) {
        raw("</")
        raw(name)
        bytes.append(UInt8(ascii: ">"))
    }

    private mutating func escape(_ text: some Collection<UInt8>) {
        func special(_ byte: UInt8) -> Bool { byte == 0x26 || byte == 0x3C || byte == 0x3E || byte == 0x22 || byte == 0x27 }
        guard text.contains(where: special) else { return bytes += text }
        for byte in text {
            switch byte {
            case UInt8(ascii: "&"): raw("&amp;")
            case UInt8(ascii: "<"): raw("&lt;")
            case UInt8(ascii: ">"): raw("&gt;")
            case UInt8(ascii: "\""): raw("&quot;")
            case UInt8(ascii: "'"): raw("&#39;")
            default: bytes.append(byte)
            }
        }
    }
}

/// A URL of this server for a link or a form: the literal parts as
/// written, every interpolated part percent-encoded (`"/stores/\(path: id)/page"`,
/// `"/\(query: [("cursor", next)])"`), so a value cannot end the path or start a scheme.
struct Href: ExpressibleByStringInterpolation, Sendable {
    let text: String

    init(stringLiteral value: StaticString) { text = value.description }
    init(stringInterpolation: Interpolation) { text = stringInterpolation.text }

    struct Interpolation: StringInterpolationProtocol {
        var text = ""

        init(literalCapacity: Int, interpolationCount: Int) { text.reserveCapacity(literalCapacity + 16 * interpolationCount) }

        mutating func appendLiteral(_ literal: StaticString) { text += literal.description }

        /// A path segment.
        mutating func appendInterpolation(path segment: String) { text += Href.percentEncoded(segment) }

        /// A fragment (`#t-…`): a browser matches it to an id after decoding it.
        mutating func appendInterpolation(fragment: String) { text += Href.percentEncoded(fragment) }

        mutating func appendInterpolation(_ number: Int) { text += String(number) }

        /// `?name=value&…` of the items that have a value; nothing if none has.
        mutating func appendInterpolation(query items: [(StaticString, String?)]) {
            var separator = "?"
            for case let (name, value?) in items {
                text += separator + name.description + "=" + Href.percentEncoded(value)
                separator = "&"
            }
        }
    }

    /// Every byte but RFC 3986's unreserved characters (letters, digits, `-._~`) as %XX.
    static func percentEncoded(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
