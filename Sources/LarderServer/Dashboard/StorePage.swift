// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `GET /stores/{id}/page`: one store for people: its metadata and
/// downloads, what its test changed (inserted rows green, deleted red,
/// updated cells old → new), then its tables with row counts and their
/// first rows, a table at a time paged with `?table=&offset=`.
extension Dashboard {
    /// Rows shown per table, and per page of a table.
    static let rowsPerTable = 20
    /// Tables shown at most (a store may hold thousands).
    static let tablesShown = 100
    /// Longest text shown in a cell, or of a name; the rest is cut.
    static let cellCharacters = 200
    /// The page stops growing past this many bytes (a store may hold
    /// thousands of wide tables and views with long names).
    static let pageMaxBytes = 8 << 20

    static func storePage(_ request: Request, _ c: RouteContext) throws -> Outcome {
        let s = c.server, id = c["id"]
        let store = try s.registry.get(id)
        let chosen = request.queryValue("table")
        let offset = try request.queryInt("offset", in: 0...Int(Int32.max)) ?? 0
        // It opens the database: off the pool.
        return .later { html(200, try storePage(s, store, table: chosen, offset: offset)) }
    }

    static func storePage(_ s: ServerContext, _ store: Store, table chosen: String?, offset: Int) throws -> String {
        var options = StoreDiff.Options()
        options.maxBytes = 4 << 20
        let diff = Result { try store.diff(options) }
        let (counts, previews) = try store.withReader {
            try Inspector.preview($0, tables: tablesShown, rows: rowsPerTable, chosen: chosen, offset: offset, textBytes: cellCharacters * 4)
        }
        let shown = previews.map { ($0.table, $0.columns, $0.rows.map { $0.map(cell) }) }
        let r = store.record
        let id = escape(r.id)
        var html = head + "<header><h1><a href=\"/\">Larder</a> · store <code>\(id)</code></h1></header><main>"
        html += "<table class=\"meta\">"
        let facts: [(String, String)] = [
            ("label", escape(r.label ?? "")), ("template", escape(r.template ?? "")), ("version", escape(r.version ?? "")),
            ("snapshot", escape(r.snapshot ?? "")), ("fixtures", escape(r.fixtures.joined(separator: ", "))),
            ("created as", escape(r.creationDescription)), ("created", time(r.createdAt)),
            ("expires", r.keptForever ? "kept forever" : (r.keep ? "kept, " : "") + time(r.expiresAt)), ("size", byteCount(store.sizeBytes)),
            ("path", "<code>\(escape(s.registry.clientPath(store.databasePath)))</code>"),
        ]
        for (name, value) in facts { html += "<tr><th>\(name)</th><td>\(value)</td></tr>" }
        html += "</table><p><a href=\"/stores/\(id)/artifact\">download zip</a> · <a href=\"/stores/\(id)/database\">download sqlite</a> · "
        html += "<a href=\"/stores/\(id)/diff\">diff as JSON</a> · <a href=\"/stores/\(id)\">store as JSON</a></p>"

        html += "<h2>What the test changed</h2>"
        switch diff {
        case .failure(let error):
            html += "<p class=\"fail\">\(escape((LarderError.classify(error)?.message) ?? "\(error)"))</p>"
        case .success(let diff):
            html += changes(diff)
        }

        html += "<h2>Tables</h2>"
        if counts.isEmpty { html += "<p>no tables</p>" }
        if counts.count > tablesShown { html += "<p>the first \(tablesShown) of \(counts.count) tables</p>" }
        for (name, columns, rows) in shown {
            if html.utf8.count > pageMaxBytes {
                html += "<p>the page stops here, past \(byteCount(Int64(pageMaxBytes))): the rest is in the store's JSON and its download</p>"
                break
            }
            let total = counts.first { $0.0 == name }?.1 ?? 0
            let skip = name == chosen ? offset : 0
            html += "<h3 id=\"t-\(escape(name))\">\(shortName(name)) <span class=\"count\">\(total) row(s)</span></h3>"
            if rows.isEmpty && total == 0 { continue }
            html += "<table class=\"rows\"><tr>" + columns.map { "<th>\(shortName($0))</th>" }.joined() + "</tr>"
            for row in rows { html += "<tr>" + row.map { "<td>\($0)</td>" }.joined() + "</tr>" }
            html += "</table><p class=\"paging\">rows \(rows.isEmpty ? skip : skip + 1)–\(skip + rows.count) of \(total)"
            let link = "/stores/\(id)/page?table=\(escape(percentEncoded(name)))&amp;offset="
            if skip > 0 { html += " · <a href=\"\(link)\(max(skip - rowsPerTable, 0))#t-\(escape(name))\">← earlier</a>" }
            if Int64(skip + rows.count) < total { html += " · <a rel=\"next\" href=\"\(link)\(skip + rowsPerTable)#t-\(escape(name))\">later →</a>" }
            html += "</p>"
        }
        return html + "</main></body></html>\n"
    }

    /// The diff: schema changes as a list, then per changed table its
    /// counts and its rows, every column of either side.
    static func changes(_ diff: StoreDiff.Changes) -> String {
        if diff.schema.isEmpty && diff.tables.isEmpty { return "<p class=\"pass\">nothing: the store is as it was created</p>" }
        var html = ""
        if !diff.schema.isEmpty {
            html += "<ul class=\"schema\">"
            for change in diff.schema {
                if html.utf8.count > pageMaxBytes / 2 {
                    html += "<li>and more: the whole list is in the diff as JSON</li>"
                    break
                }
                let what = (change.table.map { "\(shortName($0))." } ?? "") + shortName(change.name)
                html += "<li class=\"\(change.kind.rawValue)\">\(change.type.replacing("_", with: " ")) <code>\(what)</code> \(change.kind.rawValue)</li>"
            }
            html += "</ul>"
        }
        for (name, t) in diff.tables {
            html += "<h3>\(shortName(name)) <span class=\"count\">\(t.inserted) inserted · \(t.updated) updated · \(t.deleted) deleted</span></h3>"
            guard !t.rows.isEmpty else { continue }
            var columns: [String] = []
            for row in t.rows {
                for side in ["old", "new"] {
                    for (column, _) in row[side]?.objectMembers ?? [] where !columns.contains(column) { columns.append(column) }
                }
            }
            html += "<table class=\"diff\"><tr><th>op</th><th>key</th>" + columns.map { "<th>\(shortName($0))</th>" }.joined() + "</tr>"
            for row in t.rows {
                let op = row["op"]?.stringValue ?? ""
                let key = (row["key"]?.objectMembers ?? []).map { "\(escape($0.0))=\(cell($0.1))" }.joined(separator: ", ")
                html += "<tr class=\"\(op)\"><td>\(op)</td><td>\(key)</td>"
                for column in columns {
                    let old = row["old"]?[column], new = row["new"]?[column]
                    if op == "update", let old, let new, old != new {
                        html += "<td class=\"changed\"><del>\(cell(old))</del> → <ins>\(cell(new))</ins></td>"
                    } else {
                        html += "<td>\((new ?? old).map(cell) ?? "")</td>"
                    }
                }
                html += "</tr>"
            }
            html += "</table>"
            if Int64(t.rows.count) < t.total { html += "<p class=\"paging\">the first \(t.rows.count) of \(t.total) changed rows</p>" }
        }
        return html
    }

    /// Column `i` of a statement's current row as a cell, copying no more
    /// of a long value than is shown.
    static func cell(_ value: Inspector.Cell) -> String {
        switch value {
        case .null: return cell(JSONValue.null)
        case .blob(let bytes): return "<span class=\"null\">BLOB (\(bytes) bytes)</span>"
        case .text(let text, let bytes): return bytes <= cellCharacters * 4 ? cell(.string(text)) : cut(text, bytes: bytes)
        case .number(let number): return cell(number)
        }
    }

    /// A name (a table's, a column's), cut as a cell's text is.
    static func shortName(_ name: String) -> String {
        name.count > cellCharacters ? escape(String(name.prefix(cellCharacters))) + "…" : escape(name)
    }

    /// The first `cellCharacters` characters of `text`, and the whole size.
    static func cut(_ text: String, bytes: Int) -> String {
        escape(String(text.prefix(cellCharacters))) + "<span class=\"null\">… (\(bytes) bytes)</span>"
    }

    /// A value as a cell: NULL marked, BLOBs by size, long text cut.
    static func cell(_ value: JSONValue) -> String {
        switch value {
        case .null: return "<span class=\"null\">NULL</span>"
        case .string(let text):
            return text.count > cellCharacters ? cut(text, bytes: text.utf8.count) : escape(text)
        default:
            if let encoded = value["base64"]?.stringValue { return "<span class=\"null\">BLOB (\(encoded.utf8.count / 4 * 3) bytes)</span>" }
            return escape(value.jsonText)
        }
    }
}
