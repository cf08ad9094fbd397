// SPDX-License-Identifier: Apache-2.0
/// Writes compact JSON straight into bytes, value after value, for what is
/// written on every request (a store's answer, its record): no `JSONValue`
/// tree is made first. The bytes are those `JSONValue.serialized()` writes
/// for the same members in the same order.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Whether the next value or key follows another in its object or array.
    private var follows = false

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    private mutating func separate() {
        if follows { bytes.append(UInt8(ascii: ",")) }
        follows = true
    }

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        follows = false
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        follows = true
    }

    /// A member's name, one the code spells (it needs no escape); its value comes next.
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(0x22)
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(0x22)
        bytes.append(UInt8(ascii: ":"))
        follows = false
    }

    /// A member's name from data (a table's); its value comes next.
    public mutating func member(_ name: String) {
        separate()
        JSONValue.writeString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        follows = false
    }

    public mutating func string(_ value: String?) {
        separate()
        if let value { JSONValue.writeString(value, to: &bytes) } else { bytes += "null".utf8 }
    }

    /// One string of `parts` one after another, without joining them first.
    public mutating func string(joining parts: String...) {
        separate()
        bytes.append(0x22)
        for part in parts { JSONValue.writeEscaped(part, to: &bytes) }
        bytes.append(0x22)
    }

    /// A time as RFC 3339 (`Timestamp.rfc3339`); nil is null.
    public mutating func timestamp(_ value: Timestamp?) {
        separate()
        guard let value else { return bytes += "null".utf8 }
        bytes.append(0x22)
        value.writeRFC3339(to: &bytes)
        bytes.append(0x22)
    }

    /// An object of links (`LinkTemplate`) for the item `id`.
    public mutating func links(_ template: LinkTemplate, id: String) {
        separate()
        for (i, piece) in template.pieces.enumerated() {
            if i > 0 { JSONValue.writeEscaped(id, to: &bytes) }
            bytes += piece
        }
    }

    /// Any value, as `JSONValue.serialized()` writes it.
    public mutating func value(_ value: JSONValue) {
        separate()
        value.write(to: &bytes, indent: nil, level: 0)
    }

    public mutating func int(_ value: Int64) {
        separate()
        JSONValue.writeInteger(value, to: &bytes)
    }

    public mutating func double(_ value: Double) {
        separate()
        JSONValue.writeDouble(value, to: &bytes)
    }

    public mutating func bool(_ value: Bool) {
        separate()
        bytes += (value ? "true" : "false").utf8
    }

    public mutating func strings(_ values: [String]) {
        separate()
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.writeString(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Row counts as an object of table names to numbers; nil is null.
    public mutating func counts(_ counts: [(String, Int64)]?) {
        guard let counts else { return string(nil) }
        beginObject()
        for (table, count) in counts {
            member(table)
            int(count)
        }
        endObject()
    }
}

/// An object of links, each named by its tail, made once for many items
/// (a listing's stores): `"self"` is `base` then the item's id, any other
/// `name` is that `/name`. Its bytes are its own (made here, shared with
/// no other writer): a listing's parts, written on as many cores, then
/// never count references to one object from all of them at once.
public struct LinkTemplate: Sendable {
    /// The object around each of the ids, already escaped.
    let pieces: [[UInt8]]

    public init(base: String, tails: [StaticString]) {
        var escaped: [UInt8] = []
        JSONValue.writeEscaped(base, to: &escaped)
        var pieces: [[UInt8]] = []
        var piece = Array("{".utf8)
        for (i, tail) in tails.enumerated() {
            if i > 0 { piece += ",".utf8 }
            piece.append(0x22)
            tail.withUTF8Buffer { piece += $0 }
            piece += "\":\"".utf8
            piece += escaped
            pieces.append(piece)
            piece = []
            tail.withUTF8Buffer { name in
                if !name.elementsEqual("self".utf8) { piece.append(UInt8(ascii: "/")); piece += name }
            }
            piece.append(0x22)
        }
        piece += "}".utf8
        pieces.append(piece)
        self.pieces = pieces
    }
}
