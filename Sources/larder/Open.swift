// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FileSystem
import FoundationEssentials
import LarderCore
import LarderServer
import ObjectStore
import Platform
import Zip

/// `larder open ARTIFACT.zip`: a failed test's database, from CI or the
/// fleet's bucket, shown on this machine as the live store page shows it.
struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's artifact zip (a file, or s3://BUCKET/KEY.zip) in the browser: its tables, its diff, its downloads.",
        discussion: """
            Serves the store's page on 127.0.0.1 to this user only, prints its URL, opens the browser unless \
            --no-browser, and serves until interrupted, then removes what it made. The diff is against the store's \
            creation state when the artifact carries it (base.sqlite: the artifacts --artifacts-url uploads, and \
            GET /stores/{id}/artifact?base=true); an artifact without it shows its database alone. An s3:// URL is read \
            with the AWS_* variables `larder serve --cache-url` reads.
            """)

    @Argument(help: ArgumentHelp("The artifact: a zip file, or s3://BUCKET/KEY.zip.", valueName: "artifact")) var artifact: String
    @Option(help: "Port to listen on (default: a free one).") var port: Int = 0
    @Flag(help: "Print the URL only; open no browser.") var noBrowser = false

    func run() throws {
        var signals = blockStopSignals()
        let environment = ProcessInfo.processInfo.environment
        let temporary = environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((temporary + "/larder-open.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw fail("cannot make a folder in \(temporary)") }
        let folder = String(cString: made)
        defer { try? FileSystem.removeTree(folder, within: temporary) }
        let app: LarderApp, url: String
        do {
            (app, url) = try serve(folder, environment)
        } catch {
            throw fail((error as? LarderError)?.message ?? "\(error)")
        }
        FileSystem.writeText(url + "\n", to: STDOUT_FILENO)
        if !noBrowser { openBrowser(url, log: folder + "/browser.log") }
        var received: Int32 = 0
        sigwait(&signals, &received)
        app.stop()
    }

    /// Reads the artifact into `folder`, starts a server there with the store in it; the server and the page's URL.
    private func serve(_ folder: String, _ environment: [String: String]) throws -> (LarderApp, String) {
        let zip: String
        if artifact.hasPrefix("s3://") {
            let url = try BucketURL(artifact)
            guard !url.prefix.isEmpty else { throw Refusal("\(artifact) names a bucket, not an artifact in it") }
            let bucket = Bucket(url: try BucketURL("s3://" + url.bucket), access: .fromEnvironment(environment), timeoutMs: 30_000)
            zip = folder + "/artifact.zip"
            guard try bucket.download(url.prefix, to: zip, maxBytes: 1 << 40) != nil else { throw Refusal("\(artifact): no such object") }
        } else {
            zip = artifact
        }
        let reader = try ZipReader(path: zip)
        guard reader.entry("store.sqlite") != nil else { throw Refusal("\(artifact) is not a Larder artifact: it has no store.sqlite") }
        let manifest = reader.entry("manifest.json") == nil ? JSONValue.object([])
            : try JSONValue.parse(reader.read("manifest.json", maxBytes: 1 << 20))
        let incoming = folder + "/in"
        try FileSystem.makeDirectory(incoming, mode: 0o700)
        try reader.extract("store.sqlite", to: incoming + "/store.sqlite", maxBytes: 1 << 40)
        var base: String?
        if reader.entry("base.sqlite") != nil {
            try reader.extract("base.sqlite", to: incoming + "/base.sqlite", maxBytes: 1 << 40)
            base = incoming + "/base.sqlite"
        } else {
            FileSystem.writeText("larder open: this artifact carries no creation state (base.sqlite), so its page shows no diff; "
                                 + "the diff recorded when it was made is diff.json in the zip\n", to: STDERR_FILENO)
        }
        var configuration = Configuration()
        configuration.root = folder + "/root"
        configuration.fixtures = folder + "/fixtures"
        try FileSystem.makeDirectory(configuration.fixtures)
        configuration.port = port
        configuration.readyCopies = 0
        configuration.sync = "off"
        configuration.logLevel = "warning"
        configuration.ownUserOnly = true
        let app = try LarderApp(configuration: configuration)
        try app.start()
        do {
            return (app, try app.open(database: incoming + "/store.sqlite", base: base, manifest: manifest))
        } catch {
            app.stop()
            throw error
        }
    }

    /// xdg-open (open on macOS), detached; a machine without one only gets the URL.
    private func openBrowser(_ url: String, log: String) {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for name in ["xdg-open", "open"] {
            if let found = path.map({ $0 + "/" + name }).first(where: { access($0, X_OK) == 0 }) {
                _ = try? Processes.spawnDetached(found, arguments: [url], log: log)
                return
            }
        }
        FileSystem.writeText("larder open: no xdg-open here: open \(url) in a browser\n", to: STDERR_FILENO)
    }

    /// Says why on standard error; exits 2 (after what `run` defers).
    private func fail(_ message: String) -> ExitCode {
        FileSystem.writeText("larder open: \(message)\n", to: STDERR_FILENO)
        return ExitCode(2)
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
