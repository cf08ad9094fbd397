import Foundation

/// Every setting of Larder in one value, with defaults, read once from
/// `LARDER_*` environment variables and then from flags (flags win), and
/// passed down by value.
public struct Configuration: Sendable {
    public var host = "127.0.0.1"
    public var port = 7464
    public var root = (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/larder"
    public var fixtures = "./fixtures"
    public var token: String?
    public var publicURL: String?
    /// Host names (besides loopback names, the listen address and the
    /// public URL's host) that requests may name in `Host` and `Origin`.
    public var allowedHosts: [String] = []
    public var ttlSeconds = 3600
    public var maxBodyBytes = 512 * 1024 * 1024
    public var maxStores = 100_000
    public var maxDiskBytes: Int64 = 0
    public var threads = max(ProcessInfo.processInfo.activeProcessorCount, 2)
    public var connectionLimit = 1024
    public var connectionTimeoutSeconds = 60
    public var headerTimeoutSeconds = 10
    public var connectionsPerAddress = 64
    public var queryTimeoutMs = 5_000
    public var queryRowLimit = 10_000
    public var queryMaxBytes = 64 * 1024 * 1024
    public var operationTimeoutMs = 60_000
    public var waitTimeoutMaxMs = 300_000
    public var reapIntervalSeconds = 5
    /// `text` or `json`; nil: text on a terminal, JSON otherwise.
    public var logFormat: String?
    public var logLevel = "info"
    public var cacheMaxBytes: Int64 = 1 << 30

    public init() {}

    /// One documented setting: its flag, its environment variable and its default.
    public enum Key: String, CaseIterable, Sendable {
        case host, port, root, fixtures, token
        case publicURL = "public-url"
        case allowedHosts = "allowed-hosts"
        case ttlSeconds = "ttl-seconds"
        case maxBodyBytes = "max-body-bytes"
        case maxStores = "max-stores"
        case maxDiskBytes = "max-disk-bytes"
        case threads
        case connectionLimit = "connection-limit"
        case connectionTimeoutSeconds = "connection-timeout-seconds"
        case headerTimeoutSeconds = "header-timeout-seconds"
        case connectionsPerAddress = "connections-per-address"
        case queryTimeoutMs = "query-timeout-ms"
        case queryRowLimit = "query-row-limit"
        case queryMaxBytes = "query-max-bytes"
        case operationTimeoutMs = "operation-timeout-ms"
        case waitTimeoutMaxMs = "wait-timeout-max-ms"
        case reapIntervalSeconds = "reap-interval-seconds"
        case logFormat = "log-format"
        case logLevel = "log-level"
        case cacheMaxBytes = "cache-max-bytes"

        public var flag: String { "--" + rawValue }
        public var environmentVariable: String { "LARDER_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_") }

        public var help: String {
            switch self {
            case .host: return "Address to listen on; any address but loopback requires a token."
            case .port: return "Port to listen on; 0 takes a free port."
            case .root: return "Directory the stores, the template cache and temporary files live in."
            case .fixtures: return "The fixtures directory: one sub-folder per template."
            case .token: return "Bearer token required on every request but GET /health."
            case .publicURL: return "Base URL used in `links` (default: http://HOST:PORT)."
            case .allowedHosts: return "More host names that Host and Origin headers may name, comma-separated (`*`: any); loopback names and the public URL's host always may."
            case .ttlSeconds: return "Default lifetime of a store that is not kept."
            case .maxBodyBytes: return "Largest request body (uploads included), in bytes."
            case .maxStores: return "Most live stores at once; past it POST /stores answers 429."
            case .maxDiskBytes: return "Most bytes the stores may take on disk (0: no limit); past it 429."
            case .threads: return "libmicrohttpd's pool threads."
            case .connectionLimit: return "Most open connections."
            case .connectionTimeoutSeconds: return "Idle connections are closed after this many seconds."
            case .headerTimeoutSeconds: return "A new connection must send its first request's headers within this many seconds, however slowly."
            case .connectionsPerAddress: return "Most connections from one client address when listening off loopback (0: no limit)."
            case .queryTimeoutMs: return "Time limit of one POST /stores/{id}/query."
            case .queryRowLimit: return "Most rows one query answers (the answer says when rows were cut)."
            case .queryMaxBytes: return "Most bytes of rows one query answers (the answer says when rows were cut)."
            case .operationTimeoutMs: return "Time limit of fixture loads, migrations and uploads on a store (408 past it)."
            case .waitTimeoutMaxMs: return "Longest timeout_ms a count wait may ask for."
            case .reapIntervalSeconds: return "How often expired stores are removed."
            case .logFormat: return "`text` (the default on a terminal) or `json` (one object per line on standard error, the default otherwise)."
            case .logLevel: return "trace, debug, info, notice, warning, error or critical; each request is an info line."
            case .cacheMaxBytes: return "Disk budget of the template cache; least recently used entries go first."
            }
        }
    }

    public func value(of key: Key) -> String {
        switch key {
        case .host: return host
        case .port: return String(port)
        case .root: return root
        case .fixtures: return fixtures
        case .token: return token == nil ? "" : "(set)"
        case .publicURL: return publicURL ?? ""
        case .allowedHosts: return allowedHosts.joined(separator: ",")
        case .ttlSeconds: return String(ttlSeconds)
        case .maxBodyBytes: return String(maxBodyBytes)
        case .maxStores: return String(maxStores)
        case .maxDiskBytes: return String(maxDiskBytes)
        case .threads: return String(threads)
        case .connectionLimit: return String(connectionLimit)
        case .connectionTimeoutSeconds: return String(connectionTimeoutSeconds)
        case .headerTimeoutSeconds: return String(headerTimeoutSeconds)
        case .connectionsPerAddress: return String(connectionsPerAddress)
        case .queryTimeoutMs: return String(queryTimeoutMs)
        case .queryRowLimit: return String(queryRowLimit)
        case .queryMaxBytes: return String(queryMaxBytes)
        case .operationTimeoutMs: return String(operationTimeoutMs)
        case .waitTimeoutMaxMs: return String(waitTimeoutMaxMs)
        case .reapIntervalSeconds: return String(reapIntervalSeconds)
        case .logFormat: return logFormat ?? ""
        case .logLevel: return logLevel
        case .cacheMaxBytes: return String(cacheMaxBytes)
        }
    }

    public struct InvalidSetting: Error, CustomStringConvertible {
        public let description: String
    }

    /// Sets one key from text, checking its type and range.
    public mutating func set(_ key: Key, _ text: String) throws {
        func int(_ range: ClosedRange<Int>) throws -> Int {
            guard let v = Int(text), range.contains(v) else {
                throw InvalidSetting(description: "\(key.flag) must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
            }
            return v
        }
        switch key {
        case .host: host = text
        case .port: port = try int(0...65535)
        case .root: root = text
        case .fixtures: fixtures = text
        case .token: token = text.isEmpty ? nil : text
        case .publicURL: publicURL = text.isEmpty ? nil : (text.hasSuffix("/") ? String(text.dropLast()) : text)
        case .allowedHosts: allowedHosts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        case .ttlSeconds: ttlSeconds = try int(1...31_536_000)
        case .maxBodyBytes: maxBodyBytes = try int(1...Int(Int32.max) * 4)
        case .maxStores: maxStores = try int(1...10_000_000)
        case .maxDiskBytes: maxDiskBytes = Int64(try int(0...Int.max))
        case .threads: threads = try int(1...256)
        case .connectionLimit: connectionLimit = try int(1...1_000_000)
        case .connectionTimeoutSeconds: connectionTimeoutSeconds = try int(1...86_400)
        case .headerTimeoutSeconds: headerTimeoutSeconds = try int(1...3_600)
        case .connectionsPerAddress: connectionsPerAddress = try int(0...1_000_000)
        case .queryTimeoutMs: queryTimeoutMs = try int(1...3_600_000)
        case .queryRowLimit: queryRowLimit = try int(1...10_000_000)
        case .queryMaxBytes: queryMaxBytes = try int(1024...Int(Int32.max))
        case .operationTimeoutMs: operationTimeoutMs = try int(1...86_400_000)
        case .waitTimeoutMaxMs: waitTimeoutMaxMs = try int(1...3_600_000)
        case .reapIntervalSeconds: reapIntervalSeconds = try int(1...86_400)
        case .logFormat:
            guard ["", "text", "json"].contains(text) else { throw InvalidSetting(description: "\(key.flag) must be text or json, not '\(text)'") }
            logFormat = text.isEmpty ? nil : text
        case .logLevel:
            let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
            guard levels.contains(text) else { throw InvalidSetting(description: "\(key.flag) must be one of \(levels.joined(separator: ", ")), not '\(text)'") }
            logLevel = text
        case .cacheMaxBytes: cacheMaxBytes = Int64(try int(0...Int.max))
        }
    }

    /// Defaults, then every `LARDER_*` variable that is set.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Configuration {
        var configuration = Configuration()
        for key in Key.allCases {
            if let value = environment[key.environmentVariable] { try configuration.set(key, value) }
        }
        return configuration
    }

    /// Whether `host` is a loopback address (anything else requires a token).
    public var listensOnLoopbackOnly: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    public func validate() throws {
        if !listensOnLoopbackOnly && token == nil {
            throw InvalidSetting(description: "listening on \(host) requires a token (--token or LARDER_TOKEN)")
        }
    }
}
