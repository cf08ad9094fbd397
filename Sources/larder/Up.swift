// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FileSystem
import FoundationEssentials
import LarderCore
import LarderServer
import MicroHTTP
import Platform

/// What the clients' test helpers run when no server is named: join the
/// server this run shares, starting it first when there is none, and print
/// its URL.
struct Up: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the URL of a server for this test run, starting one in the background when none runs.",
        discussion: """
            The clients' test helpers run it when LARDER_URL is not set. Every process named by --for \
            (default: the one that runs `larder up`) is served; the processes of one run (pytest-xdist \
            workers, `go test ./...` packages, parallel JUnit forks) share one server, keyed by this \
            binary, the fixtures folder and the settings. It listens on a free loopback port, answering only \
            this user's processes, with its root in a temporary folder (TMPDIR, else /tmp where another user \
            could change the way to TMPDIR), and stops, removing that folder, a second after the last process \
            it serves has ended; joining it as it stops starts a new one. Its template cache (templates and \
            finished app builds) outlives the run in ${XDG_CACHE_HOME:-~/.cache}/larder/cache, unless \
            --cache-dir names another, so the next run with unchanged migrations builds nothing.

            The fixtures folder is --fixtures or LARDER_FIXTURES, else the first of fixtures, \
            tests/fixtures, test/fixtures and testdata/fixtures found from the working directory up to the \
            project's top (the folder holding .git, go.mod, package.json, pyproject.toml, setup.py, \
            pom.xml, build.gradle or Package.swift), never above a folder another user owns or anyone may write, \
            else none. Other settings are passed to `larder serve`.

            Exits 0 printing the URL, 2 when no server could be started (the reason, and the server's \
            last lines, on standard error).
            """)

    @Option(name: .customLong("for"), help: ArgumentHelp("A process to serve (repeatable).", valueName: "pid"))
    var pids: [Int32] = []
    @OptionGroup var options: ServeOptions

    static let projectMarkers = [".git", "go.mod", "package.json", "pyproject.toml", "setup.py", "pom.xml", "build.gradle",
                                 "build.gradle.kts", "Package.swift"]
    static let fixturesConventions = ["fixtures", "tests/fixtures", "test/fixtures", "testdata/fixtures"]

    func run() throws {
        do {
            print(try url())
        } catch let exit as ExitCode {
            throw exit // a setting's own message is out already
        } catch {
            FileSystem.writeText("larder up: \(error)\n", to: STDERR_FILENO)
            throw ExitCode(2)
        }
    }

    private func url() throws -> String {
        for setting in ["--root", "--port", "--host", "--public-url", "--client-root"]
        where options.settings.contains(where: { $0 == setting || $0.hasPrefix(setting + "=") }) {
            throw SharedRun.Refusal("\(setting) is chosen by `larder up` (a free loopback port and a temporary root); start `larder serve` yourself to choose it")
        }
        var configuration = try options.configuration(serving: false)
        let environment = ProcessInfo.processInfo.environment
        let named = environment["LARDER_FIXTURES"].map { !$0.isEmpty } == true
            || options.settings.contains { $0 == "--fixtures" || $0.hasPrefix("--fixtures=") }
        let fixtures: String?
        if named {
            guard FileSystem.isDirectory(configuration.fixtures) else {
                throw SharedRun.Refusal("the fixtures folder \(configuration.fixtures) does not exist or is not a folder")
            }
            fixtures = FileSystem.realPath(configuration.fixtures)
        } else {
            fixtures = Up.conventionalFixtures(from: FileManager.default.currentDirectoryPath)
        }
        let served = pids.isEmpty ? [getppid()] : pids
        if let gone = served.first(where: { !Processes.isRunning($0) }) { throw SharedRun.Refusal("no process \(gone) runs to serve") }
        let binary = Processes.executablePath()
        let temporaries = (environment["TMPDIR"].flatMap { $0.isEmpty ? nil : [$0] } ?? []) + ["/tmp"]
        // The fixtures folder is in the key as resolved, however it was named.
        let settings = Up.removing("--fixtures", from: options.settings)
        let run = try SharedRun.prepare(temporaries: temporaries, binary: binary, fixtures: fixtures, settings: settings)
        let lock = try run.lock()
        defer { lock.release() }
        for pid in served { try run.register(pid) }

        if let state = run.state() {
            if state.isRunning, let answer = try? Probe.get(state.url, path: "/health", timeoutMs: 2_000), answer.status == 200 {
                return state.url
            }
            // Killed, or stuck: start afresh, signalling only this run's own server
            // (never a process that merely got its pid, or one a planted state names).
            if state.isRunning, run.isServer(state.pid) { kill(state.pid, SIGKILL) }
        }
        run.clear(everything: false)
        if fixtures == nil { try FileSystem.makeDirectories(run.emptyFixtures) }
        configuration.fixtures = fixtures ?? run.emptyFixtures
        // (The run's root goes when the run ends: nothing in it need survive a power cut.)
        var arguments = ["serve", "--shared", run.folder, "--sync", "off"] + settings
        arguments += ["--host", "127.0.0.1", "--port", "0", "--root", run.root, "--fixtures", configuration.fixtures]
        // Templates and app builds outlive the run: the next run on this machine builds nothing.
        if configuration.cacheDirectory == nil, let kept = Up.keptCache(environment) { arguments += ["--cache-dir", kept] }
        FileSystem.remove(run.log)
        do {
            return try Up.start(binary, arguments: arguments, run: run)
        } catch {
            // Nothing left behind for these processes: without a server, their registrations mean nothing.
            for pid in served { FileSystem.remove(run.users + "/\(pid)") }
            if run.liveUsers().isEmpty { run.clear(everything: true) }
            throw error
        }
    }

    /// Starts the run's server and waits until it listens; its URL.
    private static func start(_ binary: String, arguments: [String], run: SharedRun) throws -> String {
        let pid = try Processes.spawnDetached(binary, arguments: arguments, log: run.log)
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let state = run.state(), state.pid == pid { return state.url }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                throw SharedRun.Refusal("the server stopped as it started:\n" + Up.tail(of: run.log))
            }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        throw SharedRun.Refusal("the server did not listen within 60 seconds:\n" + Up.tail(of: run.log))
    }

    /// The first conventional fixtures folder from `directory` up to the
    /// project's top, resolved. The search stops at a folder that another
    /// user owns or that anyone may write (a shared scratch folder above
    /// the project): a `fixtures/` planted there is not the project's.
    static func conventionalFixtures(from directory: String) -> String? {
        var folder = FileSystem.realPath(directory)
        while isTrusted(folder) {
            for name in fixturesConventions where FileSystem.isDirectory(folder + "/" + name) {
                let found = FileSystem.realPath(folder + "/" + name)
                return isTrusted(found) ? found : nil
            }
            if projectMarkers.contains(where: { FileSystem.exists(folder + "/" + $0) }) || folder == "/" { return nil }
            folder = FileSystem.parent(folder)
        }
        return nil
    }

    /// This user's or root's, and not writable by everyone.
    static func isTrusted(_ folder: String) -> Bool {
        var info = stat()
        return stat(folder, &info) == 0 && (info.st_uid == getuid() || info.st_uid == 0) && info.st_mode & S_IWOTH == 0
    }

    /// `${XDG_CACHE_HOME:-~/.cache}/larder/cache`, made when missing; nil
    /// when it cannot be, or when it is not this user's alone (another
    /// user's templates would be copied into this user's stores).
    static func keptCache(_ environment: [String: String]) -> String? {
        let base = environment["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 + "/.cache" : nil }
        guard let base else { return nil }
        let folder = base + "/larder/cache"
        guard (try? FileSystem.makeDirectories(folder)) != nil else { return nil }
        let larder = FileSystem.parent(folder)
        var info = stat()
        guard stat(larder, &info) == 0, info.st_uid == getuid(), info.st_mode & (S_IWOTH | S_IWGRP) == 0, isTrusted(folder) else { return nil }
        return FileSystem.realPath(folder)
    }

    /// `settings` without `name` (as `--name value` or `--name=value`).
    static func removing(_ name: String, from settings: [String]) -> [String] {
        var kept: [String] = []
        var skipNext = false
        for argument in settings {
            if skipNext { skipNext = false; continue }
            if argument == name { skipNext = true; continue }
            if !argument.hasPrefix(name + "=") { kept.append(argument) }
        }
        return kept
    }

    static func tail(of log: String) -> String {
        let text = (try? FileSystem.readFile(log)).map { String(decoding: $0.suffix(4_000), as: UTF8.self) } ?? ""
        return text.split(separator: "\n").suffix(20).map { "  " + $0 }.joined(separator: "\n")
    }
}

struct Completions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the shell completion script for bash, zsh or fish.",
        discussion: """
            It completes every command, its options and the settings (with their values where they are a few words). \
            bash: `larder completions bash > /etc/bash_completion.d/larder`; zsh: into a folder of $fpath as `_larder`; \
            fish: `larder completions fish > ~/.config/fish/completions/larder.fish`. The .deb and the tarball carry all three.
            """)

    @Argument(help: "bash, zsh or fish.") var shell: String

    func run() throws {
        guard let script = Manual.completion(shell: shell) else {
            FileSystem.writeText("larder completions: no completion for '\(shell)': bash, zsh or fish\n", to: STDERR_FILENO)
            throw ExitCode.validationFailure
        }
        print(script, terminator: "")
    }
}

struct ManualPage: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "manual", abstract: "Print the manual page (roff): `larder manual > larder.1; man ./larder.1`.")

    func run() throws {
        print(Manual.roff(version: LarderVersion.current), terminator: "")
    }
}
