// SPDX-License-Identifier: Apache-2.0
/// RFC 4180 records. Fields are text; nil marks an empty unquoted field.
enum CSVReader {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static func records(_ bytes: [UInt8]) throws -> [[String?]] {
        var records: [[String?]] = []
        var record: [String?] = []
        var field: [UInt8] = []
        var quoted = false, inQuotes = false
        var i = 0
        var line = 1
        func endField() {
            record.append(field.isEmpty && !quoted ? nil : String(decoding: field, as: UTF8.self))
            field = []
            quoted = false
        }
        while i < bytes.count {
            let c = bytes[i]
            if inQuotes {
                if c == 0x22 {
                    if i + 1 < bytes.count && bytes[i + 1] == 0x22 { field.append(0x22); i += 2; continue }
                    inQuotes = false
                } else {
                    if c == 0x0A { line += 1 }
                    field.append(c)
                }
                i += 1
                continue
            }
            switch c {
            case 0x22:
                guard field.isEmpty else { throw Failure(description: "line \(line): a quote inside an unquoted field") }
                inQuotes = true
                quoted = true
            case 0x2C: endField()
            case 0x0D: break
            case 0x0A:
                endField()
                records.append(record)
                record = []
                line += 1
            default: field.append(c)
            }
            i += 1
        }
        if inQuotes { throw Failure(description: "line \(line): unterminated quoted field") }
        if !field.isEmpty || quoted || !record.isEmpty {
            endField()
            records.append(record)
        }
        return records
    }
}
