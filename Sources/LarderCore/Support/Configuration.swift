// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import ObjectStore
import Text

/// Every setting of Larder in one value, with defaults, read once from
/// `LARDER_*` environment variables and then from flags (flags win), and
/// passed down by value.
public struct Configuration: Sendable {
    public var host = "127.0.0.1"
    public var port = 7464
    public var root = (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/larder"
    public var fixtures = "./fixtures"
    /// `refuse` (a missing fixtures folder stops the start) or `wait` (serve it once it appears).
    public var missingFixtures = "refuse"
    public var token: String?
    public var publicURL: String?
    /// Host names (besides loopback names, the listen address and the
    /// public URL's host) that requests may name in `Host` and `Origin`.
    public var allowedHosts: [String] = []
    public var ttlSeconds = 3600
    public var keptTTLSeconds = 7 * 86_400
    public var maxBodyBytes = 512 * 1024 * 1024
    public var maxStores = 100_000
    public var maxDiskBytes: Int64 = 0
    public var threads = max(ProcessInfo.processInfo.activeProcessorCount, 2)
    public var connectionLimit = 1024
    public var connectionTimeoutSeconds = 60
    public var headerTimeoutSeconds = 10
    public var connectionsPerAddress = 64
    public var readTimeoutMs = 5_000
    public var queryRowLimit = 10_000
    public var queryMaxBytes = 64 * 1024 * 1024
    public var operationTimeoutMs = 60_000
    public var waitTimeoutMaxMs = 300_000
    public var reapIntervalSeconds = 5
    /// `text` or `json`; nil: text on a terminal, JSON otherwise.
    public var logFormat: String?
    public var logLevel = "info"
    public var cacheMaxBytes: Int64 = 1 << 30
    /// The template cache's folder; nil: `cache` in the root.
    public var cacheDirectory: String?
    /// The fleet's bucket, `s3://BUCKET/PREFIX`.
    public var cacheURL: String?
    public var cacheReadOnly = false
    /// The bucket's time limit: connecting, any stall, a small request in all.
    public var cacheTimeoutMs = 10_000
    /// Where kept stores' artifacts go, `s3://BUCKET/PREFIX`.
    public var artifactsURL: String?
    /// The run's folder under the artifacts URL; nil: from the CI's variables, else the start time.
    public var artifactsRun: String?
    /// Ready copies kept per recently used template entry (0: none).
    public var readyCopies = 16
    /// Permission bits of store files (`-wal` and `-shm` follow); their
    /// directories get the same with `x` wherever there is `r`.
    public var storeMode = 0o660
    /// The group (name or gid) that store files and directories are given.
    public var storeGroup: String?
    /// The root as the tests see it (another container's mount): `path` is built from it.
    public var clientRoot: String?
    /// How long the server's writes wait for a lock a test holds on a store before answering `conflict`.
    public var busyTimeoutMs = 1_000
    /// How long the builder of an app-built template has to finish it before it is discarded.
    public var buildLeaseSeconds = 300
    /// Serve only processes of this server's own user (and root): what a
    /// self-started server (`larder up`) is, on a host other users share.
    /// Not a setting: `serve --shared` sets it.
    public var ownUserOnly = false
    /// `auto`: what is acknowledged is synced to disk (never on tmpfs); `off`: never.
    public var sync = "auto"

    public init() {}

    /// How long a stop waits for what is still going to the buckets (publishes,
    /// artifacts): each request's time limit a few times over.
    public var bucketGrace: Duration { .milliseconds(cacheTimeoutMs * 3 + 5_000) }

    /// How long a wait waits when the request does not say: 30 s, within `--wait-timeout-max-ms`.
    public var defaultWaitTimeoutMs: Int { min(30_000, waitTimeoutMaxMs) }

    /// One setting: its name (the flag without `--`), what it does, and how
    /// it is read from text and shown. The table below is the one list of
    /// settings: the command line, the environment and docs/settings.md (checked by a test) read it.
    public struct Setting: Sendable {
        public let name: String
        public let help: String
        /// What its value is, for help, completions and the manual: `<n>`, `<bytes>`, `<path>`, ...
        public var placeholder = "<text>"
        /// The values it takes, when they are a few words (completions offer them).
        public var choices: [String] = []
        let show: @Sendable (Configuration) -> String
        let set: @Sendable (inout Configuration, String) throws -> Void

        init(name: String, placeholder: String = "<text>", choices: [String] = [], help: String,
             show: @escaping @Sendable (Configuration) -> String, set: @escaping @Sendable (inout Configuration, String) throws -> Void) {
            self.name = name
            self.help = help
            self.placeholder = placeholder
            self.choices = choices
            self.show = show
            self.set = set
        }

        /// Names it had before, still accepted as flags and variables.
        public var aliases: [String] = []
        /// Given as `--name` alone: on.
        public var isFlag = false

        public var flag: String { "--" + name }
        public var environmentVariable: String { Setting.variable(name) }
        static func variable(_ name: String) -> String { "LARDER_" + name.uppercased().replacing("-", with: "_") }

        /// The same setting, also accepted under its former name.
        func formerly(_ alias: String) -> Setting {
            var setting = self
            setting.aliases.append(alias)
            return setting
        }
        public func value(in configuration: Configuration) -> String { show(configuration) }

        static func text(_ name: String, _ path: WritableKeyPath<Configuration, String> & Sendable, _ placeholder: String, _ help: String) -> Setting {
            Setting(name: name, placeholder: placeholder, help: help, show: { $0[keyPath: path] }, set: { c, text in c[keyPath: path] = text })
        }

        /// Empty text means unset.
        static func optional(_ name: String, _ path: WritableKeyPath<Configuration, String?> & Sendable, _ placeholder: String, _ help: String,
                             choices: [String] = [], shown: @escaping @Sendable (String) -> String = { $0 },
                             check: @escaping @Sendable (String) throws -> String = { $0 }) -> Setting {
            Setting(name: name, placeholder: placeholder, choices: choices, help: help, show: { $0[keyPath: path].map(shown) ?? "" }, set: { c, text in
                c[keyPath: path] = text.isEmpty ? nil : try check(text)
            })
        }

        static func int(_ name: String, _ path: WritableKeyPath<Configuration, Int> & Sendable, _ range: ClosedRange<Int>, _ help: String) -> Setting {
            Setting(name: name, placeholder: "<n>", help: help, show: { String($0[keyPath: path]) }, set: { c, text in
                guard let v = Int(text), range.contains(v) else {
                    throw InvalidSetting(description: "--\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
                }
                c[keyPath: path] = v
            })
        }

        static func bytes(_ name: String, _ path: WritableKeyPath<Configuration, Int64> & Sendable, _ help: String) -> Setting {
            Setting(name: name, placeholder: "<bytes>", help: help, show: { String($0[keyPath: path]) }, set: { c, text in
                guard let v = Int64(text), v >= 0 else { throw InvalidSetting(description: "--\(name) must be a whole number of bytes, not '\(text)'") }
                c[keyPath: path] = v
            })
        }

        /// On with `--name` alone (`--name=false` turns it off); the variable takes true, false, 1 or 0.
        static func flag(_ name: String, _ path: WritableKeyPath<Configuration, Bool> & Sendable, _ help: String) -> Setting {
            var setting = Setting(name: name, placeholder: "", choices: [], help: help, show: { String($0[keyPath: path]) }, set: { c, text in
                switch text {
                case "true", "1", "yes": c[keyPath: path] = true
                case "false", "0", "no", "": c[keyPath: path] = false
                default: throw InvalidSetting(description: "--\(name) takes no value (or =true, =false), not '\(text)'")
                }
            })
            setting.isFlag = true
            return setting
        }

        static func choice(_ name: String, _ path: WritableKeyPath<Configuration, String> & Sendable, _ choices: [String], _ help: String) -> Setting {
            Setting(name: name, placeholder: "<" + choices.joined(separator: "|") + ">", choices: choices, help: help,
                    show: { $0[keyPath: path] }, set: { c, text in
                guard choices.contains(text) else { throw InvalidSetting(description: "--\(name) must be one of \(choices.joined(separator: ", ")), not '\(text)'") }
                c[keyPath: path] = text
            })
        }
    }

    /// The settings by what they are about: `larder serve --help`, the manual and docs/settings.md list them so.
    public static let groups: [(title: String, names: [String])] = [
        ("Network", ["host", "port", "token", "public-url", "allowed-hosts", "connection-limit", "connections-per-address",
                     "connection-timeout-seconds", "header-timeout-seconds", "max-body-bytes", "threads"]),
        ("Storage", ["root", "fixtures", "missing-fixtures", "client-root", "store-mode", "store-group", "cache-dir", "cache-max-bytes", "ready-copies", "sync"]),
        ("Stores", ["ttl-seconds", "kept-ttl-seconds", "max-stores", "max-disk-bytes", "reap-interval-seconds", "build-lease-seconds"]),
        ("Time and size limits", ["operation-timeout-ms", "busy-timeout-ms", "read-timeout-ms", "query-row-limit", "query-max-bytes",
                                  "wait-timeout-max-ms"]),
        ("Fleet", ["cache-url", "cache-read-only", "cache-timeout-ms", "artifacts-url", "artifacts-run"]),
        ("Logging", ["log-format", "log-level"]),
    ]

    public static let settings: [Setting] = [
        .text("host", \.host, "<address>", "Address to listen on; any address but loopback requires a token."),
        .int("port", \.port, 0...65535, "Port to listen on; 0 takes a free port."),
        .text("root", \.root, "<path>", "Directory the stores, the template cache and temporary files live in."),
        .text("fixtures", \.fixtures, "<path>", "The fixtures directory: one sub-folder per template."),
        .choice("missing-fixtures", \.missingFixtures, ["refuse", "wait"],
                "refuse: a fixtures folder that does not exist stops the start; wait: start anyway and serve it once it appears (a CI service that starts before the checkout)."),
        .optional("token", \.token, "<token>", "Bearer token required on every request but GET /health; a browser signs in to the dashboard with it.", shown: { _ in "(set)" }),
        .optional("public-url", \.publicURL, "<url>", "Base URL used in `links` (default: http://HOST:PORT).",
                  check: { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }),
        Setting(name: "allowed-hosts", placeholder: "<name,...>",
                help: "More host names that Host and Origin headers may name, comma-separated (`*`: any); loopback names and the public URL's host always may.",
                show: { $0.allowedHosts.joined(separator: ",") },
                set: { c, text in
                    c.allowedHosts = text.split(separator: ",").map { $0.trimmingSpaces().lowercased() }.filter { !$0.isEmpty }
                }),
        .int("ttl-seconds", \.ttlSeconds, StoreRecord.ttlSeconds, "Default lifetime of a store that is not kept."),
        .int("kept-ttl-seconds", \.keptTTLSeconds, StoreRecord.ttlSeconds,
             "Lifetime of a kept store (a failed test's), from when it was kept; PATCH {\"keep\": \"forever\"} keeps one until deleted."),
        .int("max-body-bytes", \.maxBodyBytes, 1...Int(Int32.max) * 4, "Largest request body (uploads included), in bytes."),
        .int("max-stores", \.maxStores, 1...10_000_000, "Most live stores at once; past it POST /stores answers quota_exceeded."),
        .bytes("max-disk-bytes", \.maxDiskBytes, "Most bytes the stores may take on disk: their files, their own bases, ready copies, builds under way and the trash, writes into live stores included (0: no limit); past it quota_exceeded."),
        .int("threads", \.threads, 1...256, "Request threads (libmicrohttpd's thread pool), which answer fast work and hand the rest to the workers."),
        .int("connection-limit", \.connectionLimit, 1...1_000_000, "Most open connections."),
        .int("connection-timeout-seconds", \.connectionTimeoutSeconds, 1...86_400, "Idle connections are closed after this many seconds."),
        .int("header-timeout-seconds", \.headerTimeoutSeconds, 1...3_600,
             "A new connection must send its first request's headers within this many seconds, however slowly."),
        .int("connections-per-address", \.connectionsPerAddress, 0...1_000_000,
             "Most connections from one client address when listening off loopback (0: no limit)."),
        .int("read-timeout-ms", \.readTimeoutMs, 1...3_600_000, "Time limit of one POST /stores/{id}/query, and of every other read of a store.")
            .formerly("query-timeout-ms"),
        .int("query-row-limit", \.queryRowLimit, 1...10_000_000, "Most rows one query answers (the answer says when rows were cut)."),
        .int("query-max-bytes", \.queryMaxBytes, 1024...Int(Int32.max), "Most bytes of rows one query answers, and of a store's schema (the answer says when it was cut)."),
        .int("operation-timeout-ms", \.operationTimeoutMs, 1...86_400_000,
             "Time limit of fixture loads, migrations, uploads and template builds on a store (timeout past it)."),
        .int("wait-timeout-max-ms", \.waitTimeoutMaxMs, 1...3_600_000, "Longest timeout_ms a count wait may ask for."),
        .int("reap-interval-seconds", \.reapIntervalSeconds, 1...86_400, "How often expired stores are removed."),
        .optional("log-format", \.logFormat, "<text|json>", "`text` (the default on a terminal) or `json` (one object per line on standard error, the default otherwise).",
                  choices: ["text", "json"], check: { text in
                      guard text == "text" || text == "json" else { throw InvalidSetting(description: "--log-format must be text or json, not '\(text)'") }
                      return text
                  }),
        .choice("log-level", \.logLevel, ["trace", "debug", "info", "notice", "warning", "error", "critical"],
                "trace, debug, info, notice, warning, error or critical; each request is an info line."),
        .choice("sync", \.sync, ["auto", "off"],
                "auto: a store made, kept or deleted, and a changed record, is on disk before the answer, and survives a power cut (not on tmpfs, which a power cut empties anyway); off: never synced (a root thrown away after its run, as `larder up`'s)."),
        .bytes("cache-max-bytes", \.cacheMaxBytes, "Disk budget of the template cache's folder; least recently used entries go first, by every server's use of it."),
        .optional("cache-dir", \.cacheDirectory, "<path>",
                  "Folder of the template cache (templates and finished app builds), which several servers and runs may share (default: cache in the root; `larder up`: ~/.cache/larder/cache)."),
        .optional("cache-url", \.cacheURL, "<s3://bucket/prefix>",
                  "The fleet's template cache in an S3-compatible bucket: a server looks there before building and publishes what it built. Keys and endpoint from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL.",
                  check: { try Configuration.bucketURL($0, "cache-url") }),
        .flag("cache-read-only", \.cacheReadOnly, "Read the fleet's cache, never publish to it (runners of pull requests from forks)."),
        .int("cache-timeout-ms", \.cacheTimeoutMs, 100...600_000,
             "The bucket's time limit: connecting, or a stall, this long ends a request (then the bucket is left alone for 60 s); templates are built here instead."),
        .optional("artifacts-url", \.artifactsURL, "<s3://bucket/prefix>",
                  "Uploads the artifact zip of every store kept because its test failed to PREFIX/RUN/LABEL-ID.zip (`larder open` shows one).",
                  check: { try Configuration.bucketURL($0, "artifacts-url") }),
        .optional("artifacts-run", \.artifactsRun, "<name>",
                  "RUN in the artifacts' names (default: GITHUB_RUN_ID, CI_PIPELINE_ID or BUILDKITE_BUILD_ID, else the start time).",
                  check: { run in
                      guard run.utf8.count <= 100, run.utf8.allSatisfy(Catalog.isNameByte) else {
                          throw InvalidSetting(description: "--artifacts-run must be 1 to 100 of A-Z a-z 0-9 . _ -, not '\(run)'")
                      }
                      return run
                  }),
        .int("ready-copies", \.readyCopies, 0...1024,
             "Ready copies kept per recently used template entry (the 8 latest), made in the background so POST /stores only writes a record (0: none). "
                 + "Where copies are whole, their bytes also stay within --cache-max-bytes (an entry over half of it gets none) and the file system's free room; where they share blocks (GET /health), only this bounds them.")
            .formerly("pool-size"),
        Setting(name: "store-mode", placeholder: "<octal>",
                help: "Permission bits of store files, in octal; their -wal and -shm follow, and their directories get x wherever there is r (0660: 0770).",
                show: { "0" + String($0.storeMode, radix: 8) },
                set: { c, text in
                    guard let mode = Int(text, radix: 8), (0...0o777).contains(mode), mode & 0o600 == 0o600 else {
                        throw InvalidSetting(description: "--store-mode must be octal permission bits (0600 to 0777) that let the owner read and write, not '\(text)'")
                    }
                    c.storeMode = mode
                }),
        .optional("store-group", \.storeGroup, "<group>", "Group (name or gid) given to store files and directories (setgid, so -wal and -shm inherit it): let test users in by adding them to it."),
        .optional("client-root", \.clientRoot, "<path>", "The root as test code sees it (a volume mounted elsewhere): every `path` in answers is built from it.",
                  check: { $0.count > 1 && $0.hasSuffix("/") ? String($0.dropLast()) : $0 }),
        .int("busy-timeout-ms", \.busyTimeoutMs, 0...60_000,
             "How long the server's work on a store (reads, copies, fixture loads, migrations, writing queries) waits for a lock that a test holds on it; then conflict (409) with Retry-After."),
        .int("build-lease-seconds", \.buildLeaseSeconds, 1...86_400,
             "An app-built template (POST /builds) not finished within this many seconds is discarded, so a crashed builder never blocks the others."),
    ]

    public struct InvalidSetting: Error, CustomStringConvertible {
        public let description: String
    }

    /// The setting called `name`, now or formerly.
    static func setting(named name: String) -> Setting? {
        settings.first { $0.name == name || $0.aliases.contains(name) }
    }

    /// Sets one setting by name from text, checking its type and range.
    public mutating func set(_ name: String, _ text: String) throws {
        guard let setting = Configuration.setting(named: name) else {
            throw InvalidSetting(description: "unknown setting --\(name)" + (Configuration.nearest(to: name).map { "; did you mean --\($0)?" } ?? ""))
        }
        try setting.set(&self, text)
    }

    /// The setting a mistyped name most likely meant: within two edits, or the only one it begins.
    static func nearest(to name: String) -> String? {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            var row = Array(0...b.count)
            for (i, x) in a.enumerated() {
                var previous = row[0]
                row[0] = i + 1
                for (j, y) in b.enumerated() {
                    let substituted = previous + (x == y ? 0 : 1)
                    previous = row[j + 1]
                    row[j + 1] = min(substituted, row[j] + 1, row[j + 1] + 1)
                }
            }
            return row[b.count]
        }
        // A former name found answers the current one.
        let names = settings.flatMap { setting in ([setting.name] + setting.aliases).map { ($0, setting.name) } }
        let begun = names.filter { $0.0.hasPrefix(name) }
        if Set(begun.map(\.1)).count == 1 { return begun[0].1 }
        return names.map { ($0.1, distance(Array(name), Array($0.0))) }.filter { $0.1 <= 2 }.min { $0.1 < $1.1 }?.0
    }

    /// Defaults, then every `LARDER_*` variable that is set.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Configuration {
        var configuration = Configuration()
        for setting in settings {
            // The current name wins over a former one.
            let given = ([setting.name] + setting.aliases).map(Setting.variable).first { environment[$0] != nil }
            guard let variable = given, let value = environment[variable] else { continue }
            do {
                try configuration.set(setting.name, value)
            } catch let error as InvalidSetting {
                // Named as it was given: the variable, not the flag.
                throw InvalidSetting(description: error.description.replacing(setting.flag, with: variable))
            }
        }
        return configuration
    }

    /// Applies `--name value` and `--name=value` arguments, in order.
    public mutating func apply(arguments: [String]) throws {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("--") else { throw InvalidSetting(description: "unexpected argument '\(argument)'") }
            let body = argument.dropFirst(2)
            if let equals = body.firstIndex(of: "=") {
                try set(String(body[..<equals]), String(body[body.index(after: equals)...]))
            } else if Configuration.setting(named: String(body))?.isFlag == true {
                try set(String(body), "true")
            } else {
                guard let value = rest.popFirst() else { throw InvalidSetting(description: "\(argument) needs a value") }
                try set(String(body), value)
            }
        }
    }

    /// Whether `host` is a loopback address (anything else requires a token).
    public var listensOnLoopbackOnly: Bool {
        Loopback.contains(host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host)
    }

    /// An `s3://BUCKET/PREFIX` setting, checked as the bucket client reads it.
    static func bucketURL(_ text: String, _ name: String) throws -> String {
        do {
            return try BucketURL(text).description
        } catch let invalid as BucketURL.Invalid {
            throw InvalidSetting(description: "--\(name): \(invalid.description)")
        }
    }

    public func validate() throws {
        if !listensOnLoopbackOnly && token == nil {
            throw InvalidSetting(description: "listening on \(host) requires a token (--token or LARDER_TOKEN)")
        }
    }
}
