import Foundation
@testable import LarderCore
import TestSupport
import XCTest

final class JSONAndConfigurationTests: XCTestCase {
    func testParsesAndKeepsKeyOrder() throws {
        let v = try JSONValue.parse(#"{"b": 1, "a": [true, null, 2.5, "x\u00e9\n"], "big": 20240613061102}"#)
        XCTAssertEqual(v.objectMembers?.map(\.0), ["b", "a", "big"])
        XCTAssertEqual(v["big"]?.intValue, 20240613061102)
        XCTAssertEqual(v["a"]?.arrayValue?[3].stringValue, "xé\n")
        XCTAssertEqual(try JSONValue.parse(String(decoding: v.serialized(), as: UTF8.self)), v)
    }

    func testNumbersAreWrittenInFull() {
        for value: Int64 in [0, 7, -7, 10, -10, 1_000_000, Int64.max, Int64.min, 20_240_613_061_102] {
            XCTAssertEqual(JSONValue.int(value).jsonText, String(value))
        }
        XCTAssertEqual(JSONValue.array([.double(3), .double(-0.5), .double(1e300), .null, .bool(false)]).jsonText, "[3.0,-0.5,1e+300,null,false]")
    }

    /// Strings are written as Foundation's encoder reads them: every control
    /// character, quote and backslash escaped, wherever it sits in the string.
    func testStringsAreEscapedWhereverTheEscapesSit() throws {
        let texts = ["", "plain", "\"", "\\", "a\"b\\c", "\n\r\t", "\u{0}\u{1}\u{1f}x\u{7f}", "é🧺 \"quoted\"", "end\\", "\"start",
                     String(repeating: "long run ", count: 50) + "\u{8}"]
        for text in texts {
            let bytes = JSONValue.string(text).serialized()
            XCTAssertEqual(try JSONDecoder().decode(String.self, from: Data(bytes)), text)
            XCTAssertFalse(bytes.dropFirst().dropLast().contains { $0 < 0x20 }, "no raw control bytes")
        }
    }

    func testRejectsBadJSON() {
        for text in ["{", "{\"a\": 1,}", "[1 2]", "{\"a\": 1, \"a\": 2}", "01", "\"\u{01}\"", "{} x", "nul"] {
            XCTAssertThrowsError(try JSONValue.parse(text), text)
        }
        // Invalid UTF-8 inside a string, with and without escapes beside it.
        for bytes: [UInt8] in [[0x22, 0xFF, 0xFE, 0x22], [0x22, 0x5C, 0x6E, 0xC3, 0x22], [0x7B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x3A, 0x31, 0x7D]] {
            XCTAssertThrowsError(try JSONValue.parse(bytes), "\(bytes)")
        }
        XCTAssertEqual(try JSONValue.parse(Array("\"é\\n\"".utf8)).stringValue, "é\n")
        // Strings without escapes: ASCII, and the rest validated.
        XCTAssertEqual(try JSONValue.parse(Array("\"é🧺 x\"".utf8)).stringValue, "é🧺 x")
        XCTAssertEqual(try JSONValue.parse("[\"plain\", \"\"]"), .array([.string("plain"), .string("")]))
    }

    /// Integers are read exactly to Int64's ends; past them, and anything
    /// with a fraction or exponent, as a double.
    func testNumbersAreReadExactlyToTheEndsOfInt64() throws {
        let cases: [(String, JSONValue)] = [
            ("0", .int(0)), ("-0", .int(0)), ("7", .int(7)), ("-12", .int(-12)),
            ("9223372036854775807", .int(.max)), ("-9223372036854775808", .int(.min)),
            ("9223372036854775808", .double(9223372036854775808)), ("-9223372036854775809", .double(-9223372036854775809)),
            ("123456789012345678901234", .double(123456789012345678901234)), ("1.5", .double(1.5)), ("-2e3", .double(-2000)),
        ]
        for (text, value) in cases { XCTAssertEqual(try JSONValue.parse(text), value, text) }
        for text in ["-", "1.", "1e", "--1", "+1", "1.e5", "00"] { XCTAssertThrowsError(try JSONValue.parse(text), text) }
        // A duplicate key, in a small object and past the sixteenth key of a large one.
        let many = (0..<20).map { "\"k\($0)\": \($0)" }
        XCTAssertNoThrow(try JSONValue.parse("{" + many.joined(separator: ",") + "}"))
        XCTAssertThrowsError(try JSONValue.parse("{" + (many + ["\"k3\": 0"]).joined(separator: ",") + "}"))
        XCTAssertThrowsError(try JSONValue.parse("{" + (many + ["\"k19\": 0"]).joined(separator: ",") + "}"))
        XCTAssertThrowsError(try JSONValue.parse(#"{"a": {"b": 1, "c": 2, "b": 3}}"#))
    }

    func testLoopbackIsReadAsAnAddressNotAPrefix() {
        for host in ["localhost", "127.0.0.1", "127.255.1.9", "::1", "0:0:0:0:0:0:0:1", "0::1", "::ffff:127.0.0.1", "LOCALHOST"] {
            XCTAssertTrue(Loopback.contains(host), host)
        }
        for host in ["127.x.attacker.example", "127.0.0.1.attacker.example", "127.1", "127.0.0.256", "128.0.0.1", "::2", "::ffff:10.0.0.1",
                     "1::1", "", "localhost.example", "0.0.0.0", "::"] {
            XCTAssertFalse(Loopback.contains(host), host)
        }
        var c = Configuration()
        c.host = "127.0.0.1.attacker.example"
        XCTAssertFalse(c.listensOnLoopbackOnly, "a name is not loopback: it needs a token")
        c.host = "[::1]"
        XCTAssertTrue(c.listensOnLoopbackOnly)
    }

    func testEverySettingIsInOneGroup() {
        let grouped = Configuration.groups.flatMap(\.names)
        XCTAssertEqual(grouped.count, Set(grouped).count, "a setting in two groups")
        XCTAssertEqual(Set(grouped), Set(Configuration.settings.map(\.name)), "a setting in no group, or a group naming no setting")
        XCTAssertEqual(Configuration.settings.first { $0.name == "log-level" }?.choices.count, 7)
        XCTAssertEqual(Configuration.settings.first { $0.name == "port" }?.placeholder, "<n>")
    }

    func testASettingsFormerNameIsStillAcceptedAndTheCurrentOneWins() throws {
        var c = Configuration()
        try c.apply(arguments: ["--pool-size", "3", "--query-timeout-ms=70"])
        XCTAssertEqual(c.readyCopies, 3)
        XCTAssertEqual(c.readTimeoutMs, 70)
        XCTAssertEqual(try Configuration.fromEnvironment(["LARDER_POOL_SIZE": "5"]).readyCopies, 5)
        XCTAssertEqual(try Configuration.fromEnvironment(["LARDER_QUERY_TIMEOUT_MS": "9", "LARDER_READ_TIMEOUT_MS": "11"]).readTimeoutMs, 11)
        XCTAssertThrowsError(try Configuration.fromEnvironment(["LARDER_POOL_SIZE": "x"])) {
            XCTAssertEqual("\($0)", "LARDER_POOL_SIZE must be a whole number in 0...1024, not 'x'")
        }
    }

    func testAMistypedSettingGetsItsLikelyNameAndAVariableIsNamedAsGiven() throws {
        var c = Configuration()
        for (typed, meant) in [("prot", "port"), ("pool", "ready-copies"), ("log-lvl", "log-level"), ("fixture", "fixtures"), ("ttl-second", "ttl-seconds")] {
            XCTAssertThrowsError(try c.set(typed, "1")) { XCTAssertEqual("\($0)", "unknown setting --\(typed); did you mean --\(meant)?") }
        }
        XCTAssertThrowsError(try c.set("zzzzzz", "1")) { XCTAssertEqual("\($0)", "unknown setting --zzzzzz") }
        XCTAssertThrowsError(try Configuration.fromEnvironment(["LARDER_PORT": "abc"])) {
            XCTAssertEqual("\($0)", "LARDER_PORT must be a whole number in 0...65535, not 'abc'")
        }
    }

    func testAStoreAnOlderLarderKeptIsKeptForeverAsItWasPromised() throws {
        let old = try JSONValue.parse(Array(#"{"id": "st_1", "sequence": 1, "created_at": 1, "expires_at": 2, "keep": true}"#.utf8))
        XCTAssertEqual(StoreRecord(json: old)?.keptForever, true)
        let kept = try JSONValue.parse(Array(#"{"id": "st_1", "sequence": 1, "created_at": 1, "expires_at": 2, "keep": true, "kept_forever": false}"#.utf8))
        XCTAssertEqual(StoreRecord(json: kept)?.keptForever, false)
        let record = try XCTUnwrap(StoreRecord(json: kept))
        XCTAssertEqual(StoreRecord(json: try JSONValue.parse(record.serialized()))?.keptForever, false)
    }

    /// A record is one journal line, whatever its label holds, and reads back whole.
    func testARecordIsOneLineAndReadsBackWhole() throws {
        let created = Timestamp(seconds: 1_795_000_000.125)
        let record = StoreRecord(id: "st_1", sequence: 42, template: "gallery", version: "6", snapshot: nil, fixtures: ["artists", "art\"works"],
                                 build: nil, label: "line\nbreak \"quoted\" \\ tab\t nul\u{0} é 🗄", createdAt: created,
                                 expiresAt: created.adding(seconds: 3600), keep: true, keptForever: false,
                                 creation: .init(version: "5", fixtures: ["artists"], source: "fork of st_0"),
                                 counts: [("artists", 4), ("artworks", 12)])
        let line = record.serialized()
        XCTAssertFalse(line.contains(0x0A), "no line break inside a line")
        let back = try XCTUnwrap(StoreRecord(json: try JSONValue.parse(line)))
        XCTAssertEqual(back.serialized(), line)
        XCTAssertEqual(back.label, record.label)
        XCTAssertEqual(back.fixtures, record.fixtures)
        XCTAssertEqual(back.creation, record.creation)
        XCTAssertEqual(back.createdAt.seconds, created.seconds)
        XCTAssertEqual(back.counts?.map { $0.0 }, ["artists", "artworks"])
        XCTAssertEqual(back.counts?.map { $0.1 }, [4, 12])
        // The writer writes what a JSONValue of the same members does.
        var w = JSONWriter()
        w.beginObject(); w.member("a\"b"); w.string(nil); w.key("n"); w.double(2); w.key("c"); w.counts(nil)
        w.key("t"); w.counts([("x\ny", 3)])
        w.key("p"); w.string(joining: "/r\"t", "/", "s.sqlite"); w.key("at"); w.timestamp(created); w.key("never"); w.timestamp(nil)
        w.key("links"); w.links(LinkTemplate(base: "http://h/", tails: ["self", "counts"]), id: "\"x"); w.endObject()
        XCTAssertEqual(w.bytes, JSONValue.object([("a\"b", .null), ("n", .double(2)), ("c", .null), ("t", .object([("x\ny", .int(3))])),
                                                  ("p", .string("/r\"t/s.sqlite")), ("at", .string(created.rfc3339)), ("never", .null),
                                                  ("links", .object([("self", .string("http://h/\"x")), ("counts", .string("http://h/\"x/counts"))]))]).serialized())
        // Escapes found in every place of a word, and across words.
        for text in ["plain text longer than eight", "\"start", "end\"", "mid\\dle of a long one", "\u{1}\u{1f} é\u{7f}🗄 tab\t", "12345678\n"] {
            XCTAssertEqual(try JSONValue.parse(JSONValue.string(text).serialized()), .string(text), text)
        }
    }

    func testEverySettingHasAFlagAnEnvironmentVariableAndIsInTheSettingsPage() throws {
        let page = try String(contentsOfFile: repositoryRoot + "/docs/settings.md", encoding: .utf8)
        XCTAssertEqual(Set(Configuration.settings.map(\.name)).count, Configuration.settings.count, "a setting is listed twice")
        for setting in Configuration.settings {
            XCTAssertTrue(page.contains("`\(setting.flag)`"), "docs/settings.md lacks \(setting.flag)")
            XCTAssertTrue(page.contains("`\(setting.environmentVariable)`"), "docs/settings.md lacks \(setting.environmentVariable)")
            // Every setting reads back what it shows.
            var c = Configuration()
            XCTAssertNoThrow(try c.set(setting.name, setting.value(in: Configuration())), setting.name)
        }
        let c = try Configuration.fromEnvironment(["LARDER_PORT": "0", "LARDER_TTL_SECONDS": "5", "LARDER_HOST": "0.0.0.0", "LARDER_TOKEN": "t"])
        XCTAssertEqual(c.port, 0)
        XCTAssertEqual(c.ttlSeconds, 5)
        XCTAssertNoThrow(try c.validate())
        XCTAssertThrowsError(try Configuration.fromEnvironment(["LARDER_PORT": "x"]))
        XCTAssertThrowsError(try Configuration.fromEnvironment(["LARDER_HOST": "0.0.0.0"]).validate(), "any address but loopback needs a token")
        // Flags after the environment, both spellings; unknown ones and bad values refused.
        var flags = try Configuration.fromEnvironment(["LARDER_PORT": "9"])
        try flags.apply(arguments: ["--port", "0", "--log-format=json", "--public-url", "http://x:1/", "--allowed-hosts", "A.example, b"])
        XCTAssertEqual(flags.port, 0)
        XCTAssertEqual(flags.logFormat, "json")
        XCTAssertEqual(flags.publicURL, "http://x:1")
        XCTAssertEqual(flags.allowedHosts, ["a.example", "b"])
        XCTAssertThrowsError(try flags.apply(arguments: ["--no-such-setting", "1"]))
        XCTAssertThrowsError(try flags.apply(arguments: ["--log-format", "xml"]))
        XCTAssertThrowsError(try flags.apply(arguments: ["--log-level", "loud"]))
        XCTAssertThrowsError(try flags.apply(arguments: ["--port"]))
    }
}
