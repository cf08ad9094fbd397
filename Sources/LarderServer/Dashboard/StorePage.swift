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
        let s = c.server, id = try c.parameter("id")
        let store = try s.registry.get(id)
        let chosen = request.queryValue("table")
        let offset = try request.queryInt("offset", in: 0...Int(Int32.max)) ?? 0
        // It opens the database: on the workers.
        return .later { html(200, try storePage(s, store, table: chosen, offset: offset)) }
    }

    static func storePage(_ s: ServerContext, _ store: Store, table chosen: String?, offset: Int) throws -> String {
        var options = StoreDiff.Options()
        options.maxBytes = 4 << 20
        let diff = Result { try store.diff(options) }
        let (counts, previews) = try store.withReader {
            try Inspector.preview($0, tables: tablesShown, rows: rowsPerTable, chosen: chosen, offset: offset, textBytes: cellCharacters * 4)
        }
        let id = store.record.id
        return document { h in
            h.element("header") { h in
                h.element("h1") { h in
                    h.raw("<a href=\"/\">Larder</a> · store ")
                    h.element("code", text: id)
                }
            }
            h.element("main") { h in
                h.append(facts(s, store))
                h.element("p") { h in
                    h.element("a", ["href": .url("/stores/\(path: id)/artifact")], text: "download zip")
                    h.text(" · ")
                    h.element("a", ["href": .url("/stores/\(path: id)/database")], text: "download sqlite")
                    h.text(" · ")
                    h.element("a", ["href": .url("/stores/\(path: id)/diff")], text: "diff as JSON")
                    h.text(" · ")
                    h.element("a", ["href": .url("/stores/\(path: id)")], text: "store as JSON")
                }
                h.raw("<h2>What the test changed</h2>")
                switch diff {
                case .failure(let error):
                    h.element("p", ["class": "fail"], text: (LarderError.classify(error)?.message) ?? "\(error)")
                case .success(let diff):
                    h.append(changes(diff))
                }
                tables(id: id, counts: counts, previews: previews, chosen: chosen, offset: offset, into: &h)
            }
        }
    }

    /// The store's record, a line a fact.
    static func facts(_ s: ServerContext, _ store: Store) -> HTML {
        let r = store.record
        let facts: [(StaticString, HTML)] = [
            ("label", HTML(text: r.label ?? "")), ("template", HTML(text: r.template ?? "")), ("version", HTML(text: r.version ?? "")),
            ("snapshot", HTML(text: r.snapshot ?? "")), ("fixtures", HTML(text: r.fixtures.joined(separator: ", "))),
            ("created as", HTML(text: r.creationDescription)), ("created", time(r.createdAt)),
            ("expires", expiry(r)), ("size", HTML(text: byteCount(store.sizeBytes))),
            ("path", HTML { h in h.element("code", text: s.registry.clientPath(store.databasePath)) }),
        ]
        return HTML { h in
            h.element("table", ["class": "meta"]) { h in
                for (name, value) in facts {
                    h.element("tr") { h in
                        h.element("th") { h in h.raw(name) }
                        h.element("td") { h in h.append(value) }
                    }
                }
            }
        }
    }

    /// Each table's name and row count, then a page of its rows with links
    /// to the pages before and after; written into the page `h` so that it
    /// stops when the page grows past `pageMaxBytes`.
    static func tables(id: String, counts: [(String, Int64)], previews: [Inspector.Preview], chosen: String?, offset: Int,
                       into h: inout HTML) {
        h.raw("<h2>Tables</h2>")
        if counts.isEmpty { h.raw("<p>no tables</p>") }
        if counts.count > tablesShown { h.element("p", text: "the first \(tablesShown) of \(counts.count) tables") }
        for preview in previews {
            if h.byteCount > pageMaxBytes {
                h.element("p") { h in
                    h.text("the page stops here, past \(byteCount(Int64(pageMaxBytes)))")
                    h.raw(": the rest is in the store's JSON and its download")
                }
                break
            }
            let name = preview.table, rows = preview.rows
            let total = counts.first { $0.0 == name }?.1 ?? 0
            let skip = name == chosen ? offset : 0
            h.element("h3", ["id": "t-\(name)"]) { h in
                h.append(shortName(name))
                h.text(" ")
                h.element("span", ["class": "count"], text: "\(total) row(s)")
            }
            if rows.isEmpty && total == 0 { continue }
            h.element("table", ["class": "rows"]) { h in
                h.element("tr") { h in
                    for column in preview.columns { h.element("th") { h in h.append(shortName(column)) } }
                }
                for row in rows {
                    h.element("tr") { h in
                        for value in row { h.element("td") { h in h.append(cell(value)) } }
                    }
                }
            }
            func link(from offset: Int) -> Href { "/stores/\(path: id)/page\(query: [("table", name)])&offset=\(offset)#t-\(fragment: name)" }
            h.element("p", ["class": "paging"]) { h in
                h.text("rows \(rows.isEmpty ? skip : skip + 1)–\(skip + rows.count) of \(total)")
                if skip > 0 {
                    h.text(" · ")
                    h.element("a", ["href": .url(link(from: max(skip - rowsPerTable, 0)))], text: "← earlier")
                }
                if Int64(skip + rows.count) < total {
                    h.text(" · ")
                    h.element("a", ["rel": "next", "href": .url(link(from: skip + rowsPerTable))], text: "later →")
                }
            }
        }
    }

    /// The diff: schema changes as a list, then per changed table its
    /// counts and its rows, every column of either side.
    static func changes(_ diff: StoreDiff.Changes) -> HTML {
        HTML { h in
            if diff.schema.isEmpty && diff.tables.isEmpty { return h.raw("<p class=\"pass\">nothing: the store is as it was created</p>") }
            if !diff.schema.isEmpty {
                h.element("ul", ["class": "schema"]) { h in
                    for change in diff.schema {
                        if h.byteCount > pageMaxBytes / 2 {
                            h.raw("<li>and more: the whole list is in the diff as JSON</li>")
                            break
                        }
                        h.element("li", ["class": .text(change.kind.rawValue)]) { h in
                            h.text(change.type.replacing("_", with: " ") + " ")
                            h.element("code") { h in
                                if let table = change.table {
                                    h.append(shortName(table))
                                    h.text(".")
                                }
                                h.append(shortName(change.name))
                            }
                            h.text(" " + change.kind.rawValue)
                        }
                    }
                }
            }
            for (name, t) in diff.tables { h.append(changes(of: name, t)) }
        }
    }

    /// One changed table: its counts, then its changed rows.
    static func changes(of name: String, _ t: StoreDiff.TableChanges) -> HTML {
        HTML { h in
            h.element("h3") { h in
                h.append(shortName(name))
                h.text(" ")
                h.element("span", ["class": "count"], text: "\(t.inserted) inserted · \(t.updated) updated · \(t.deleted) deleted")
            }
            guard !t.rows.isEmpty else { return }
            var columns: [String] = []
            for row in t.rows {
                for side in ["old", "new"] {
                    for (column, _) in row[side]?.objectMembers ?? [] where !columns.contains(column) { columns.append(column) }
                }
            }
            h.element("table", ["class": "diff"]) { h in
                h.element("tr") { h in
                    h.raw("<th>op</th><th>key</th>")
                    for column in columns { h.element("th") { h in h.append(shortName(column)) } }
                }
                for row in t.rows {
                    let op = row["op"]?.stringValue ?? ""
                    h.element("tr", ["class": .text(op)]) { h in
                        h.element("td", text: op)
                        h.element("td") { h in
                            for (n, (column, value)) in (row["key"]?.objectMembers ?? []).enumerated() {
                                if n > 0 { h.text(", ") }
                                h.text(column + "=")
                                h.append(cell(value))
                            }
                        }
                        for column in columns {
                            let old = row["old"]?[column], new = row["new"]?[column]
                            if op == "update", let old, let new, old != new {
                                h.element("td", ["class": "changed"]) { h in
                                    h.element("del") { h in h.append(cell(old)) }
                                    h.text(" → ")
                                    h.element("ins") { h in h.append(cell(new)) }
                                }
                            } else {
                                h.element("td") { h in if let value = new ?? old { h.append(cell(value)) } }
                            }
                        }
                    }
                }
            }
            if Int64(t.rows.count) < t.total { h.element("p", ["class": "paging"], text: "the first \(t.rows.count) of \(t.total) changed rows") }
        }
    }

    /// A previewed value as a cell, copying no more of a long value than is shown.
    static func cell(_ value: Inspector.Cell) -> HTML {
        switch value {
        case .null: return cell(JSONValue.null)
        case .blob(let bytes): return note("BLOB (\(bytes) bytes)")
        case .text(let text, let bytes): return bytes <= cellCharacters * 4 ? cell(.string(text)) : cut(text, bytes: bytes)
        case .number(let number): return cell(number)
        }
    }

    /// A name (a table's, a column's), cut as a cell's text is.
    static func shortName(_ name: String) -> HTML {
        name.count > cellCharacters ? HTML(text: name.prefix(cellCharacters) + "…") : HTML(text: name)
    }

    /// The first `cellCharacters` characters of `text`, and the whole size.
    static func cut(_ text: String, bytes: Int) -> HTML {
        HTML { h in
            h.text(text.prefix(cellCharacters))
            h.append(note("… (\(bytes) bytes)"))
        }
    }

    /// What stands for a value not shown as it is (NULL, a BLOB, the rest of a long text).
    static func note(_ text: String) -> HTML {
        HTML { h in h.element("span", ["class": "null"], text: text) }
    }

    /// A value as a cell: NULL marked, BLOBs by size, long text cut.
    static func cell(_ value: JSONValue) -> HTML {
        switch value {
        case .null: return note("NULL")
        case .string(let text):
            return text.count > cellCharacters ? cut(text, bytes: text.utf8.count) : HTML(text: text)
        default:
            if let encoded = value["base64"]?.stringValue { return note("BLOB (\(encoded.utf8.count / 4 * 3) bytes)") }
            return HTML(text: value.jsonText)
        }
    }
}
