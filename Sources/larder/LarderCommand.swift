import ArgumentParser
import Foundation
import Glibc
import LarderCore
import LarderServer

struct LarderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "Isolated throwaway SQLite stores for test suites, over HTTP.",
        version: LarderVersion.current,
        subcommands: [Serve.self, Check.self],
        defaultSubcommand: Serve.self
    )
}

/// Flags shared by the commands that read the fixtures directory.
struct ServeOptions: ParsableArguments {
    @Option(help: ArgumentHelp(Configuration.Key.host.help)) var host: String?
    @Option(help: ArgumentHelp(Configuration.Key.port.help)) var port: String?
    @Option(help: ArgumentHelp(Configuration.Key.root.help)) var root: String?
    @Option(help: ArgumentHelp(Configuration.Key.fixtures.help)) var fixtures: String?
    @Option(help: ArgumentHelp(Configuration.Key.token.help)) var token: String?
    @Option(name: .customLong("public-url"), help: ArgumentHelp(Configuration.Key.publicURL.help)) var publicURL: String?
    @Option(name: .customLong("ttl-seconds"), help: ArgumentHelp(Configuration.Key.ttlSeconds.help)) var ttlSeconds: String?
    @Option(name: .customLong("max-body-bytes"), help: ArgumentHelp(Configuration.Key.maxBodyBytes.help)) var maxBodyBytes: String?
    @Option(name: .customLong("max-stores"), help: ArgumentHelp(Configuration.Key.maxStores.help)) var maxStores: String?
    @Option(name: .customLong("max-disk-bytes"), help: ArgumentHelp(Configuration.Key.maxDiskBytes.help)) var maxDiskBytes: String?
    @Option(help: ArgumentHelp(Configuration.Key.threads.help)) var threads: String?
    @Option(name: .customLong("connection-limit"), help: ArgumentHelp(Configuration.Key.connectionLimit.help)) var connectionLimit: String?
    @Option(name: .customLong("connection-timeout-seconds"), help: ArgumentHelp(Configuration.Key.connectionTimeoutSeconds.help)) var connectionTimeoutSeconds: String?
    @Option(name: .customLong("header-timeout-seconds"), help: ArgumentHelp(Configuration.Key.headerTimeoutSeconds.help)) var headerTimeoutSeconds: String?
    @Option(name: .customLong("connections-per-address"), help: ArgumentHelp(Configuration.Key.connectionsPerAddress.help)) var connectionsPerAddress: String?
    @Option(name: .customLong("query-timeout-ms"), help: ArgumentHelp(Configuration.Key.queryTimeoutMs.help)) var queryTimeoutMs: String?
    @Option(name: .customLong("query-row-limit"), help: ArgumentHelp(Configuration.Key.queryRowLimit.help)) var queryRowLimit: String?
    @Option(name: .customLong("query-max-bytes"), help: ArgumentHelp(Configuration.Key.queryMaxBytes.help)) var queryMaxBytes: String?
    @Option(name: .customLong("operation-timeout-ms"), help: ArgumentHelp(Configuration.Key.operationTimeoutMs.help)) var operationTimeoutMs: String?
    @Option(name: .customLong("allowed-hosts"), help: ArgumentHelp(Configuration.Key.allowedHosts.help)) var allowedHosts: String?
    @Option(name: .customLong("wait-timeout-max-ms"), help: ArgumentHelp(Configuration.Key.waitTimeoutMaxMs.help)) var waitTimeoutMaxMs: String?
    @Option(name: .customLong("reap-interval-seconds"), help: ArgumentHelp(Configuration.Key.reapIntervalSeconds.help)) var reapIntervalSeconds: String?
    @Option(name: .customLong("log-format"), help: ArgumentHelp(Configuration.Key.logFormat.help)) var logFormat: String?
    @Option(name: .customLong("log-level"), help: ArgumentHelp(Configuration.Key.logLevel.help)) var logLevel: String?
    @Option(name: .customLong("cache-max-bytes"), help: ArgumentHelp(Configuration.Key.cacheMaxBytes.help)) var cacheMaxBytes: String?

    var flags: [(Configuration.Key, String?)] {
        [(.host, host), (.port, port), (.root, root), (.fixtures, fixtures), (.token, token), (.publicURL, publicURL),
         (.ttlSeconds, ttlSeconds), (.maxBodyBytes, maxBodyBytes), (.maxStores, maxStores), (.maxDiskBytes, maxDiskBytes),
         (.threads, threads), (.connectionLimit, connectionLimit), (.connectionTimeoutSeconds, connectionTimeoutSeconds),
         (.headerTimeoutSeconds, headerTimeoutSeconds), (.connectionsPerAddress, connectionsPerAddress),
         (.queryTimeoutMs, queryTimeoutMs), (.queryRowLimit, queryRowLimit),
         (.queryMaxBytes, queryMaxBytes), (.operationTimeoutMs, operationTimeoutMs), (.allowedHosts, allowedHosts), (.waitTimeoutMaxMs, waitTimeoutMaxMs),
         (.reapIntervalSeconds, reapIntervalSeconds), (.logFormat, logFormat), (.logLevel, logLevel), (.cacheMaxBytes, cacheMaxBytes)]
    }

    /// Environment first, then flags.
    func configuration() throws -> Configuration {
        do {
            var configuration = try Configuration.fromEnvironment()
            for case let (key, value?) in flags { try configuration.set(key, value) }
            try configuration.validate()
            return configuration
        } catch let error as Configuration.InvalidSetting {
            throw ValidationError(error.description)
        }
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the fixtures directory over HTTP (the default command).")

    @OptionGroup var options: ServeOptions

    func run() throws {
        let configuration = try options.configuration()
        // Block the stop signals in every thread (threads inherit the mask),
        // then wait for them here.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        let app: LarderApp
        do {
            app = try LarderApp(configuration: configuration)
            try app.start()
        } catch {
            let message = (error as? LarderError)?.message ?? "\(error)"
            FileHandle.standardError.write(Data("larder: \(message)\n".utf8))
            throw ExitCode(2)
        }
        FileHandle.standardOutput.write(Data("larder listening on \(app.listenURL)\n".utf8))
        app.logger.notice("listening", metadata: ["url": .string(app.listenURL), "root": .string(app.registry.root),
                                                  "fixtures": .string(configuration.fixtures)])
        var received: Int32 = 0
        sigwait(&signals, &received)
        app.logger.notice("stopping", metadata: ["signal": .stringConvertible(Int(received))])
        app.stop()
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that every snapshot migrates to the latest schema, keeps its data and matches a fresh build.",
        discussion: "Exits 0 when every check passes, 1 when any fails.")

    @Option(help: ArgumentHelp(Configuration.Key.fixtures.help)) var fixtures: String?
    @Option(help: "Check only this template.") var template: String?
    @Option(help: "Also write the results as JUnit XML to this file.") var junit: String?

    func run() throws {
        var configuration = try Configuration.fromEnvironment()
        if let fixtures { configuration.fixtures = fixtures }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-check-\(getpid())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let check = MigrationCheck(catalog: Catalog(directory: configuration.fixtures), temporaryDirectory: scratch)
        let colour = isatty(1) != 0 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
        let printer = LinePrinter()
        let results: [MigrationCheck.Result]
        do {
            results = try check.run(template: template) { result in
                let mark = result.passed ? (colour ? "\u{1B}[32mPASS\u{1B}[0m" : "PASS") : (colour ? "\u{1B}[31mFAIL\u{1B}[0m" : "FAIL")
                var line = "\(mark) \(result.template)/\(result.snapshot) \(result.fromVersion ?? "?") -> \(result.toVersion ?? "?") (\(String(format: "%.1f", result.milliseconds)) ms)"
                for failure in result.failures { line += "\n       - " + failure }
                printer.print(line)
            }
        } catch {
            FileHandle.standardError.write(Data("larder check: \(error)\n".utf8))
            throw ExitCode(2)
        }
        if let junit { try MigrationCheck.junit(results).write(toFile: junit, atomically: true, encoding: .utf8) }
        let failed = results.filter { !$0.passed }.count
        printer.print("\(results.count - failed) passed, \(failed) failed")
        if failed > 0 { throw ExitCode(1) }
    }
}

/// Whole lines to standard output from any thread, flushed at once.
final class LinePrinter: Sendable {
    private let lock = NSLock()
    func print(_ line: String) {
        lock.lock()
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        lock.unlock()
    }
}
