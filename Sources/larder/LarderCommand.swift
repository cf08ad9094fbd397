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

/// The server's settings, every one of `Configuration.settings`, as
/// `--name value` (or `--name=value`) after the subcommand; `LARDER_*`
/// variables first, flags win.
struct ServeOptions: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings, `--name value`: see below.", valueName: "settings"))
    var settings: [String] = []

    static var settingsHelp: String {
        Configuration.settings.map { s in
            "  \(s.flag) (\(s.environmentVariable), default '\(s.value(in: Configuration()))')\n      \(s.help)"
        }.joined(separator: "\n")
    }

    func configuration() throws -> Configuration {
        do {
            var configuration = try Configuration.fromEnvironment()
            try configuration.apply(arguments: settings)
            try configuration.validate()
            return configuration
        } catch let error as Configuration.InvalidSetting {
            throw ValidationError(error.description)
        }
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the fixtures directory over HTTP (the default command).",
                                                    discussion: "Settings:\n" + ServeOptions.settingsHelp)

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
        discussion: "Exits 0 when every check passes, 1 when any fails, 2 when it cannot check (no such directory or template, nothing to check).")

    @Option(help: "The fixtures directory: one sub-folder per template.") var fixtures: String?
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
            FileHandle.standardError.write(Data("larder check: \((error as? LarderError)?.message ?? "\(error)")\n".utf8))
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
