// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FileSystem
import FoundationEssentials
import LarderCore
import LarderServer
import MicroHTTP
import Platform
import Synchronization
import Text

struct LarderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "Isolated throwaway SQLite stores for test suites, over HTTP.",
        version: LarderVersion.current,
        subcommands: [Serve.self, Check.self, Health.self, Warm.self, Up.self, Open.self, Completions.self, ManualPage.self],
        defaultSubcommand: Serve.self
    )
}

/// The server's settings, every one of `Configuration.settings`, as
/// `--name value` (or `--name=value`) after the subcommand; `LARDER_*`
/// variables first, flags win.
struct ServeOptions: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings, `--name value`, listed by `larder serve --help`.", valueName: "settings"))
    var settings: [String] = []

    /// `serving: false` (warm): what only a listening server needs is not asked for.
    func configuration(serving: Bool = true) throws -> Configuration {
        do {
            var configuration = try Configuration.fromEnvironment()
            try configuration.apply(arguments: settings)
            if serving { try configuration.validate() }
            return configuration
        } catch let error as Configuration.InvalidSetting {
            // One line that says what to change, not the whole usage.
            FileSystem.writeText("larder: \(error.description)\n", to: STDERR_FILENO)
            throw ExitCode.validationFailure
        }
    }
}

/// Blocks SIGTERM and SIGINT in every thread (threads inherit the mask), to
/// be waited for with `sigwait` on the set answered; ignores SIGPIPE.
func blockStopSignals() -> sigset_t {
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGTERM)
    sigaddset(&signals, SIGINT)
    pthread_sigmask(SIG_BLOCK, &signals, nil)
    signal(SIGPIPE, SIG_IGN)
    return signals
}

struct Serve: ParsableCommand {
    // `--help` is answered by `run`: usage and examples first, the settings by group after.
    static let configuration = CommandConfiguration(
        abstract: "Serve the fixtures directory over HTTP (the default command).",
        discussion: "Examples:\n" + Manual.examples.map { "  \($0.command)\n      \($0.what)" }.joined(separator: "\n")
            + "\n\n`larder serve --help` lists every setting.",
        helpNames: [])

    @Option(help: ArgumentHelp("Serve the processes named in this folder's users/ and stop, removing the folder, a second after the last has ended (what `larder up` starts).", valueName: "folder"))
    var shared: String?
    @OptionGroup var options: ServeOptions

    func run() throws {
        if options.settings.contains(where: { $0 == "--help" || $0 == "-h" }) {
            print(Manual.serveHelp())
            return
        }
        var configuration = try options.configuration()
        // Every local user reaches a loopback port: a run's server answers only its user's processes.
        configuration.ownUserOnly = shared != nil
        let run = shared.map(SharedRun.init(folder:))
        var signals = blockStopSignals()

        // A fixtures folder that is not there is a mistake to say now, not at the first 404.
        let present = FileSystem.isDirectory(configuration.fixtures)
        if !present, FileSystem.exists(configuration.fixtures) || configuration.missingFixtures != "wait" {
            let what = FileSystem.exists(configuration.fixtures) ? "is not a folder" : "does not exist"
            FileSystem.writeText("""
                larder: the fixtures folder \(configuration.fixtures) \(what): make it (one sub-folder per template), \
                or name yours with --fixtures DIR or LARDER_FIXTURES (--missing-fixtures wait: start and wait for it)\n
                """, to: STDERR_FILENO)
            throw ExitCode(2)
        }
        let app: LarderApp
        do {
            app = try LarderApp(configuration: configuration)
            try app.start()
        } catch {
            let message = (error as? LarderError)?.message ?? "\(error)"
            FileSystem.writeText("larder: \(message)\n", to: STDERR_FILENO)
            throw ExitCode(2)
        }
        FileSystem.writeText("larder listening on \(app.listenURL)\n", to: STDOUT_FILENO)
        let templates = app.templateNames
        app.logger.notice("listening", metadata: ["url": .string(app.listenURL), "root": .string(app.registry.root),
                                                  "fixtures": .string(configuration.fixtures),
                                                  "templates": .string(templates.joined(separator: ","))])
        if !present {
            app.logger.warning("the fixtures folder does not exist yet: its templates are served once it appears",
                               metadata: ["fixtures": .string(configuration.fixtures)])
        } else if templates.isEmpty, run == nil {
            app.logger.warning("no templates in the fixtures folder: stores can only be empty, uploaded or built; add one sub-folder per template",
                               metadata: ["fixtures": .string(configuration.fixtures)])
        }
        let ending = run.map { run in
            try? run.write(SharedRun.State(url: app.listenURL, pid: getpid(), started: Processes.startTime(getpid())))
            return SharedServerWatch(run: run)
        }
        var received: Int32 = 0
        sigwait(&signals, &received)
        app.logger.notice("stopping", metadata: ["signal": .stringConvertible(Int(received)),
                                                 "reason": .string(ending?.lockWhenUnused != nil ? "no process left to serve" : "signal")])
        app.stop()
        if let run, let lock = ending?.lockWhenUnused ?? (try? FileLock.wait(run.lockFile)) {
            run.clear(everything: true)
            lock.release()
        }
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that every snapshot migrates to the latest schema, keeps its data and matches a fresh build, and that down migrations go down.",
        discussion: "Exits 0 when every check passes, 1 when any fails, 2 when it cannot check (no such directory or template, nothing to check).")

    @Option(help: "The fixtures directory: one sub-folder per template.") var fixtures: String?
    @Option(help: "Check only this template.") var template: String?
    @Option(help: "Also write the results as JUnit XML to this file (its folder is made).") var junit: String?
    @Flag(help: "Skip the round trips (up, down to nothing, up again) of templates with down migrations.") var noRoundTrip = false
    @Flag(help: "Skip the check that every table and column of a snapshot that held data still holds it after migrating.") var noDataCheck = false

    func run() throws {
        var configuration = try Configuration.fromEnvironment()
        if let fixtures { configuration.fixtures = fixtures }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-check-\(getpid())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let check = MigrationCheck(catalog: Catalog(directory: configuration.fixtures), temporaryDirectory: scratch)
        let colour = isatty(1) != 0 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
        let printer = LinePrinter()
        let results: [MigrationCheck.Report]
        do {
            results = try check.run(template: template, roundTrips: !noRoundTrip, dataCheck: !noDataCheck)
        } catch {
            FileSystem.writeText("larder check: \((error as? LarderError)?.message ?? "\(error)")\n", to: STDERR_FILENO)
            throw ExitCode(2)
        }
        // In the order of the JUnit report: template, its snapshots by name, then its round trip.
        for result in results {
            let mark = result.passed ? (colour ? "\u{1B}[32mPASS\u{1B}[0m" : "PASS") : (colour ? "\u{1B}[31mFAIL\u{1B}[0m" : "FAIL")
            var line = "\(mark) \(result.group)/\(result.title) (\(result.milliseconds.fixed(1)) ms)"
            for failure in result.failures { line += "\n       - " + failure }
            for note in result.notes { line += "\n       note: " + note }
            printer.print(line)
        }
        if let junit {
            // Its folder made (test-reports/ is rarely there yet); a file that cannot be written is not a failed check.
            do {
                let folder = FileSystem.parent(junit)
                if !folder.isEmpty { try FileSystem.makeDirectories(folder) }
                try FileSystem.writeAtomically(Array(MigrationCheck.junit(results).utf8), to: junit)
            } catch {
                FileSystem.writeText("larder check: cannot write the JUnit report \(junit): \(Check.reason(error))\n", to: STDERR_FILENO)
                throw ExitCode(2)
            }
        }
        let failed = results.filter { !$0.passed }.count
        printer.print("\(results.count - failed) passed, \(failed) failed")
        if failed > 0 { throw ExitCode(1) }
    }
}

extension Check {
    /// What went wrong writing a file, in words (not Foundation's error domain and code).
    static func reason(_ error: Error) -> String {
        (error as? FileSystem.Failure)?.description ?? "\(error)"
    }
}

struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask a running server whether it is up: exit 0 when GET /health answers ok, 1 otherwise.",
        discussion: """
            For container health checks, readiness probes and CI wait loops. The server is --url, else \
            $LARDER_URL, else http://$LARDER_HOST:$LARDER_PORT (an any-address host is asked on loopback).
            """)

    @Option(help: "The server's base URL (http only).") var url: String?
    @Option(help: "Seconds one attempt may take.") var timeout: Double = 2
    @Option(help: "Keep asking, every 0.1 s, until it answers ok or this many seconds pass.") var wait: Double = 0

    func validate() throws {
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be more than 0 and at most 3600 seconds") }
        guard wait >= 0, wait <= 86_400 else { throw ValidationError("--wait must be 0 to 86400 seconds") }
    }

    func run() throws {
        let base = url ?? Health.defaultURL(ProcessInfo.processInfo.environment)
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        while true {
            do {
                let answer = try Probe.get(base, path: "/health", timeoutMs: Int(timeout * 1000))
                let body = try? JSONValue.parse(answer.body)
                guard answer.status == 200, body?["status"]?.stringValue == "ok" else {
                    let said = body?["error"]?["message"]?.stringValue ?? String(decoding: answer.body.prefix(200), as: UTF8.self)
                    throw Probe.Failure("answered \(answer.status): \(said)")
                }
                let version = body?["version"]?.stringValue ?? "?"
                let stores = body?["stores"]?.intValue.map(String.init) ?? "?"
                let templates = body?["templates"]?.intValue.map { $0 == 0 ? "no templates (its fixtures folder has none)" : "\($0) templates" }
                LinePrinter().print("ok: larder \(version) at \(base), \(stores) stores" + (templates.map { ", " + $0 } ?? ""))
                return
            } catch {
                guard ContinuousClock.now < deadline else {
                    FileSystem.writeText("larder health: \(base): \(error)\n", to: STDERR_FILENO)
                    throw ExitCode(1)
                }
                Threads.sleep(milliseconds: 100)
            }
        }
    }

    /// `$LARDER_URL`, else the address `larder serve` would listen on.
    static func defaultURL(_ environment: [String: String]) -> String {
        if let url = environment["LARDER_URL"], !url.isEmpty { return url }
        var host = environment["LARDER_HOST"].flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        if host == "0.0.0.0" { host = "127.0.0.1" }
        if host == "::" || host == "[::]" { host = "::1" }
        if host.contains(":") && !host.hasPrefix("[") { host = "[\(host)]" }
        return "http://\(host):\(environment["LARDER_PORT"].flatMap { $0.isEmpty ? nil : $0 } ?? "7464")"
    }
}

struct Warm: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Build the template cache ahead of time: each template at latest with its default fixtures, and each snapshot.",
        discussion: """
            Run it before `larder serve` on the same --root (an image build, a CI cache step): the server's \
            first stores are then copies, not builds. Takes every setting `serve` takes (LARDER_* too). \
            Exits 0 when every entry is in the cache, 1 when one failed to build, 2 when it cannot start \
            (no fixtures directory or template, the root in use by a running server).
            """)

    @Option(help: "Warm only this template.") var template: String?
    @OptionGroup var options: ServeOptions

    func run() throws {
        let configuration = try options.configuration(serving: false)
        let results: [Provisioner.Warmed]
        do {
            // No ready copies: they would be thrown away when the server starts.
            let core = try Core(configuration: configuration, readyCopies: 0)
            defer { core.close() }
            let printer = LinePrinter()
            results = try core.provisioner.warm(template: template) { w in
                let name = w.template + (w.snapshot.map { " snapshot " + $0 } ?? "")
                if let failure = w.failure {
                    FileSystem.writeText("FAIL \(name): \(failure)\n", to: STDERR_FILENO)
                } else {
                    printer.print("\(w.built ? "built" : "cached") \(name) (\(w.bytes) bytes, \(w.milliseconds.fixed(1)) ms)")
                }
            }
        } catch {
            FileSystem.writeText("larder warm: \((error as? LarderError)?.message ?? "\(error)")\n", to: STDERR_FILENO)
            throw ExitCode(2)
        }
        let failed = results.filter { $0.failure != nil }.count
        LinePrinter().print("\(results.count - failed) cache entries ready in \(configuration.root), \(failed) failed")
        if failed > 0 { throw ExitCode(1) }
    }
}

/// A shared server's watch on the processes it serves: every 0.1 s it looks
/// at `users/`; once none has run for `SharedRun.linger`, it takes the
/// run's lock (so no `larder up` hands out this server meanwhile), looks
/// once more, forgets the server's state, and stops the server with
/// SIGTERM, leaving the lock held for the clean-up after the stop. A run
/// whose folder was removed stops its server the same way, with no lock.
final class SharedServerWatch: Sendable {
    private let held = Mutex<FileLock?>(nil)

    /// The run's lock, when the watch stopped the server.
    var lockWhenUnused: FileLock? { held.withLock { $0 } }

    init(run: SharedRun) {
        Threads.start("larder-shared-watch") { [self] in
            var idleSince: ContinuousClock.Instant?
            while true {
                Threads.sleep(milliseconds: 100)
                guard run.liveUsers().isEmpty else { idleSince = nil; continue }
                let since = idleSince ?? .now
                idleSince = since
                guard ContinuousClock.now - since >= SharedRun.linger else { continue }
                let runLock: FileLock
                do {
                    runLock = try FileLock.wait(run.lockFile)
                } catch let failure as FileSystem.Failure where failure.isMissing {
                    // The run's folder is gone (a temporary-file cleaner, a test's clean-up): no
                    // `larder up` can find this server any more, and no process it served is left.
                    kill(getpid(), SIGTERM)
                    return
                } catch {
                    continue
                }
                guard run.liveUsers().isEmpty else { runLock.release(); idleSince = nil; continue }
                FileSystem.remove(run.stateFile)
                held.withLock { $0 = runLock }
                kill(getpid(), SIGTERM)
                return
            }
        }
    }
}

/// Whole lines to standard output from any thread, flushed at once.
final class LinePrinter: Sendable {
    private let lock = Mutex(())
    func print(_ line: String) {
        lock.withLock { _ in FileSystem.writeText(line + "\n", to: STDOUT_FILENO) }
    }
}
