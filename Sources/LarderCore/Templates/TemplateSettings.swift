// SPDX-License-Identifier: Apache-2.0
/// What a template's `template.json` says: how the team configured its
/// migration tool, the default fixtures, and how strict its round trip is.
/// Every key is optional; an unknown key is an error naming the file, so a
/// typo never silently changes nothing.
public struct TemplateSettings: Sendable {
    /// How strict a template's round trip of down migrations is.
    public enum RoundTrip: String, Sendable, CaseIterable {
        /// Every down runs and the schema equals a fresh build's at each version.
        case exact
        /// Every down runs and the trip ends with no user table left; schemas are not compared.
        case runs
        /// No round trip.
        case off
    }

    public var migrations = MigrationSettings()
    /// Fixtures applied when a request names none.
    public var fixtures: [String] = []
    public var roundTrip: RoundTrip = .exact

    public init() {}

    static let keys = ["format", "fixtures", "migrations_table", "no_tx_wrap", "placeholders", "placeholder_replacement",
                       "code_migrations", "round_trip"]

    /// Reads `template.json` of template `name` (already parsed).
    public static func read(_ json: JSONValue, template name: String) throws -> TemplateSettings {
        func bad(_ why: String) -> LarderError {
            LarderError(.badRequest, "template '\(name)': template.json \(why)", details: [("template", .string(name)), ("file", "template.json")])
        }
        guard let members = json.objectMembers else { throw bad("must be an object, not \(json.typeName)") }
        var s = TemplateSettings()
        for (key, value) in members {
            switch key {
            case "format":
                guard let text = value.stringValue, let format = MigrationFormat(rawValue: text) else {
                    throw bad("has an unknown format \(value.jsonText); formats: \(MigrationFormat.names.joined(separator: ", "))")
                }
                s.migrations.format = format
            case "fixtures":
                guard let list = value.arrayValue, case let names = list.compactMap(\.stringValue), names.count == list.count else {
                    throw bad("\"fixtures\" must be a list of fixture names")
                }
                s.fixtures = names
            case "migrations_table":
                guard let table = value.stringValue, !table.isEmpty, table.utf8.count <= 128, !table.hasPrefix("sqlite_") else {
                    throw bad("\"migrations_table\" must be a table name (1 to 128 bytes, not sqlite_...)")
                }
                s.migrations.table = table
            case "no_tx_wrap":
                guard case .bool(let flag) = value else { throw bad("\"no_tx_wrap\" must be true or false") }
                s.migrations.noTransactionWrap = flag
            case "placeholders":
                guard let pairs = value.objectMembers else { throw bad("\"placeholders\" must be an object of names and values") }
                for (placeholder, text) in pairs {
                    guard let text = text.stringValue else { throw bad("placeholder '\(placeholder)' must have a string value") }
                    // Flyway looks placeholders up in any case.
                    s.migrations.placeholders[placeholder.lowercased()] = text
                }
            case "placeholder_replacement":
                guard case .bool(let flag) = value else { throw bad("\"placeholder_replacement\" must be true or false") }
                s.migrations.placeholderReplacement = flag
            case "code_migrations":
                guard let list = value.arrayValue else { throw bad("\"code_migrations\" must be a list of {\"version\", \"description\"}") }
                for item in list {
                    guard let version = item["version"]?.stringValue ?? item["version"]?.intValue.map(String.init), !version.isEmpty,
                          item.objectMembers?.allSatisfy({ ["version", "description", "script"].contains($0.0) }) == true else {
                        throw bad("each of \"code_migrations\" must be {\"version\", \"description\", \"script\"} (version required), not \(item.jsonText)")
                    }
                    s.migrations.codeMigrations.append(.init(version: version, description: item["description"]?.stringValue ?? "",
                                                             script: item["script"]?.stringValue))
                }
            case "round_trip":
                guard let text = value.stringValue, let mode = RoundTrip(rawValue: text) else {
                    throw bad("\"round_trip\" must be one of \(RoundTrip.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))")
                }
                s.roundTrip = mode
            default:
                throw bad("has an unknown key '\(key)'; keys: \(keys.joined(separator: ", "))")
            }
        }
        return s
    }
}
