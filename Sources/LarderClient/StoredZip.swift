// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A zip of stored (uncompressed) entries, as a check-in sends a database
/// with its `-wal` (`PUT /stores/{id}/database`, `application/zip`).
/// Foundation has no zip writer; this is the little a check-in needs: each
/// entry's CRC-32 and sizes in its local header (no data descriptor), a
/// central directory, no ZIP64 (so at most 4 GiB an entry and in all).
enum StoredZip {
    struct Entry {
        var name: String
        var data: Data
        var modified: Date
    }

    struct TooLarge: Error, CustomStringConvertible {
        var bytes: Int
        var description: String { "a check-in zip is at most 4 GiB without ZIP64 (this one would be \(bytes) bytes)" }
    }

    static func archive(_ entries: [Entry]) throws -> Data {
        var out = Data()
        var central = Data()
        for entry in entries {
            let name = Data(entry.name.utf8)
            var crc = CRC32()
            crc.update(entry.data)
            let (time, date) = dosTime(entry.modified)
            guard let size = UInt32(exactly: entry.data.count), let offset = UInt32(exactly: out.count) else {
                throw TooLarge(bytes: out.count + entry.data.count)
            }
            // Local file header.
            out.append(le32: 0x0403_4b50)
            out.append(le16: 20)            // version needed: 2.0
            out.append(le16: 0x0800)        // flags: names in UTF-8
            out.append(le16: 0)             // method: stored
            out.append(le16: time)
            out.append(le16: date)
            out.append(le32: crc.value)
            out.append(le32: size)          // compressed
            out.append(le32: size)          // uncompressed
            out.append(le16: UInt16(name.count))
            out.append(le16: 0)             // extra field
            out.append(name)
            out.append(entry.data)
            // Its central directory record.
            central.append(le32: 0x0201_4b50)
            central.append(le16: 0x031e)    // made by: Unix, 3.0
            central.append(le16: 20)
            central.append(le16: 0x0800)
            central.append(le16: 0)
            central.append(le16: time)
            central.append(le16: date)
            central.append(le32: crc.value)
            central.append(le32: size)
            central.append(le32: size)
            central.append(le16: UInt16(name.count))
            central.append(le16: 0)         // extra field
            central.append(le16: 0)         // comment
            central.append(le16: 0)         // disk
            central.append(le16: 0)         // internal attributes
            central.append(le32: 0o100600 << 16) // external: a regular file, rw-------
            central.append(le32: offset)
            central.append(name)
        }
        guard let directoryOffset = UInt32(exactly: out.count), UInt32(exactly: out.count + central.count) != nil else {
            throw TooLarge(bytes: out.count + central.count)
        }
        out.append(central)
        // End of central directory.
        out.append(le32: 0x0605_4b50)
        out.append(le16: 0)
        out.append(le16: 0)
        out.append(le16: UInt16(entries.count))
        out.append(le16: UInt16(entries.count))
        out.append(le32: UInt32(central.count))
        out.append(le32: directoryOffset)
        out.append(le16: 0)                 // comment
        return out
    }

    /// MS-DOS time and date (local time, two-second steps, from 1980).
    static func dosTime(_ date: Date) -> (time: UInt16, date: UInt16) {
        let parts = Calendar(identifier: .gregorian).dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let year = min(max((parts.year ?? 1980) - 1980, 0), 127)
        let time = (parts.hour ?? 0) << 11 | (parts.minute ?? 0) << 5 | (parts.second ?? 0) / 2
        let day = year << 9 | (parts.month ?? 1) << 5 | (parts.day ?? 1)
        return (UInt16(time), UInt16(day))
    }
}

extension Data {
    mutating func append(le16 value: UInt16) {
        append(contentsOf: [UInt8(value & 0xff), UInt8(value >> 8)])
    }

    mutating func append(le32 value: UInt32) {
        append(contentsOf: [UInt8(value & 0xff), UInt8(value >> 8 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 24)])
    }
}
