// SPDX-License-Identifier: Apache-2.0
import CSQLite

/// SQL text taken apart without a database: for counting a file's
/// statements where its tables do not exist yet (a migration's notes).
public enum StatementText {
    /// The statements of `sql` as SQLite ends them: at a `;` after which
    /// the text so far is complete (`sqlite3_complete`: a `;` in a string,
    /// a comment or a trigger's body ends nothing); pieces of nothing but
    /// whitespace, `;` and comments are no statement.
    public static func statements(_ sql: String) -> [Substring] {
        var found: [Substring] = []
        var start = sql.startIndex
        var at = sql.startIndex
        while let semicolon = sql[at...].firstIndex(of: ";") {
            let end = sql.index(after: semicolon)
            if sqlite3_complete(String(sql[start..<end])) != 0 {
                if hasStatement(sql[start..<end]) { found.append(sql[start..<end]) }
                start = end
            }
            at = end
        }
        if hasStatement(sql[start...]) { found.append(sql[start...]) }
        return found
    }

    /// Whether a piece holds more than whitespace, `;` and comments.
    public static func hasStatement(_ piece: Substring) -> Bool {
        var rest = piece
        while true {
            rest = rest.drop(while: { $0.isWhitespace || $0 == ";" })
            if rest.hasPrefix("--") {
                rest = rest.drop(while: { $0 != "\n" && $0 != "\r\n" })
                continue
            }
            if rest.hasPrefix("/*") {
                guard let end = rest.firstRange(of: "*/") else { return false }
                rest = rest[end.upperBound...]
                continue
            }
            return !rest.isEmpty
        }
    }
}
