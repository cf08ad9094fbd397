// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import LarderCore
import Logging

/// How the server logs: one JSON object per line for machines, or
/// swift-log's plain lines for people, on standard error.
enum LogFormat: String {
    case text, json
}

extension Logger {
    /// Larder's logger for a configuration: `--log-format` (a terminal gets
    /// text unless told; anything else JSON) and `--log-level`.
    static func larder(_ configuration: Configuration) -> Logger {
        let format = configuration.logFormat.flatMap(LogFormat.init(rawValue:)) ?? (FileSystem.isTerminal(2) ? .text : .json)
        var logger = Logger(label: "larder") { label in
            switch format {
            case .json: return JSONLinesLogHandler(label: label)
            case .text: return StreamLogHandler.standardError(label: label)
            }
        }
        logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
        return logger
    }
}

extension Logger {
    /// This logger with the request's id on every line.
    func with(requestID: String) -> Logger {
        var logger = self
        logger[metadataKey: "request_id"] = .string(requestID)
        return logger
    }
}

/// One JSON object per line on standard error: `ts`, `level`, `msg`, then
/// the metadata (`request_id`, `method`, `path`, `status`, `ms`, ...), numbers
/// as numbers. Each line goes out in one write, so lines never interleave.
struct JSONLinesLogHandler: LogHandler {
    let label: String
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // Written straight into bytes: every request logs a line.
        var all = event.metadata ?? [:]
        if !metadata.isEmpty { all = metadata.merging(all) { _, new in new } }
        if let error = event.error { all["error"] = .string("\(error)") }
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("ts"); w.string(Timestamp.now.rfc3339)
        w.key("level"); w.string(event.level.rawValue)
        w.key("msg"); w.string(event.message.description)
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            w.member(key)
            w.value(JSONLinesLogHandler.json(value))
        }
        w.endObject()
        var bytes = w.bytes
        bytes.append(0x0A)
        bytes.withUnsafeBytes { try? FileSystem.writeAll(2, $0, path: "standard error") }
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let s): return .string(s)
        case .stringConvertible(let v):
            if let i = v as? Int { return .int(Int64(i)) }
            if let d = v as? Double { return .double(d) }
            if let b = v as? Bool { return .bool(b) }
            return .string(v.description)
        case .array(let items): return .array(items.map(json))
        case .dictionary(let members): return .object(members.keys.sorted().map { ($0, json(members[$0]!)) })
        }
    }
}
