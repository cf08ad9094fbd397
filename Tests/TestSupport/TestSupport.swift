import Foundation
import LarderCore
import SQLite
import XCTest

/// What every test target shares: where the repository is, scratch
/// directories, a flag for threads, and the contract's error in assertions.

/// The repository's root, found from this file.
public let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

public let sampleFixtures = repositoryRoot + "/fixtures"
public let brokenFixtures = repositoryRoot + "/Tests/fixtures/broken"

/// A temporary directory removed when the value goes.
public final class Scratch: @unchecked Sendable {
    public let path: String

    public init() {
        path = NSTemporaryDirectory() + "larder-tests-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes files (relative path → text) and answers the directory.
    @discardableResult
    public func write(_ files: [String: String], under folder: String = "") -> String {
        let base = folder.isEmpty ? path : path + "/" + folder
        for (name, text) in files {
            let full = base + "/" + name
            try! FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try! text.write(toFile: full, atomically: true, encoding: .utf8)
        }
        return base
    }

    public func database(_ name: String = "db.sqlite") throws -> Connection {
        try Connection(path: path + "/" + name)
    }
}

/// A boolean that threads share.
public final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Bool

    public init(_ value: Bool = false) { _value = value }

    public var value: Bool {
        get { lock.lock(); defer { lock.unlock() }; return _value }
        set { lock.lock(); _value = newValue; lock.unlock() }
    }

    public func set() { value = true }
    public var isSet: Bool { value }
}

/// Every row of a query, as text (NULL for null).
public func rows(_ db: Connection, _ sql: String) throws -> [[String]] {
    try db.rows(sql).map { $0.map { $0.string ?? "NULL" } }
}

/// `expression` throws a `LarderError` with `code`; `check` looks further.
public func XCTAssertLarderError<T>(_ code: LarderError.Code, _ expression: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line,
                                    _ check: (LarderError) -> Void = { _ in }) {
    XCTAssertThrowsError(try expression(), file: file, line: line) { error in
        guard let e = error as? LarderError else { return XCTFail("not a LarderError: \(error)", file: file, line: line) }
        XCTAssertEqual(e.code, code, e.message, file: file, line: line)
        check(e)
    }
}

extension LarderError {
    public func detail(_ key: String) -> JSONValue? { details.first { $0.0 == key }?.1 }
}

/// A core on a new root under `scratch`: its registry, provisioner, editor, catalog and builds.
public struct CoreServices {
    public let registry: StoreRegistry
    public let provisioner: Provisioner
    public let editor: StoreEditor
    public let catalog: Catalog
    public let builds: BuildRegistry

    public init(_ scratch: Scratch, fixtures: String = sampleFixtures, readyCopies: Int = 0,
                configure: (inout Configuration) -> Void = { _ in }) throws {
        var c = Configuration()
        c.root = scratch.path + "/root"
        c.fixtures = fixtures
        configure(&c)
        let core = try Core(configuration: c, readyCopies: readyCopies)
        registry = core.registry
        provisioner = core.provisioner
        editor = core.editor
        catalog = core.catalog
        builds = core.builds
    }

    /// A store of `template` at `version` with `fixtures`.
    public func store(_ template: String, version: String = "latest", fixtures: [String]? = nil, label: String? = nil) throws -> Store {
        var request = Provisioner.Request()
        request.template = template
        request.version = version
        request.fixtures = fixtures
        return try provisioner.create(try provisioner.plan(request), label: label, ttlSeconds: nil).0
    }
}

/// The ids the journal of records under a root names (`stores.journal`).
public func journaledIDs(_ root: String) -> Set<String> {
    let text = (try? String(contentsOfFile: root + "/stores.journal", encoding: .utf8)) ?? ""
    return Set(text.split(separator: "\n").compactMap { line in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
    })
}

/// The ready copies under a root: directories in `stores/` whose record is not in the journal yet.
public func readyCopyDirectories(_ root: String) -> [String] {
    let ids = journaledIDs(root)
    return ((try? FileManager.default.contentsOfDirectory(atPath: root + "/stores")) ?? []).sorted().filter { !ids.contains($0) }
}

/// The stores under a root: directories in `stores/` with their record in the journal.
public func storeDirectories(_ root: String) -> [String] {
    let ids = journaledIDs(root)
    return ((try? FileManager.default.contentsOfDirectory(atPath: root + "/stores")) ?? []).sorted().filter { ids.contains($0) }
}

/// Runs Python's zipfile on the archive at `path` and answers what `script`
/// prints: with `z` the open archive, `sys.argv[2...]` the `arguments`,
/// after `testzip` checked every CRC and zlib's inflate found each deflated
/// entry's data one whole stream (zipfile alone stops at the entry's size,
/// and so would not notice a missing final block). Fails the test when
/// Python does.
public func readZip(_ path: String, _ script: String, arguments: [String] = [],
                    file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let python = Process()
    python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    python.arguments = ["python3", "-c", """
        import hashlib, json, sqlite3, sys, zipfile, zlib
        z = zipfile.ZipFile(sys.argv[1])
        assert z.testzip() is None
        raw = open(sys.argv[1], "rb").read()
        for i in z.infolist():
            if i.compress_type == zipfile.ZIP_DEFLATED:
                at = i.header_offset
                start = at + 30 + int.from_bytes(raw[at + 26:at + 28], "little") + int.from_bytes(raw[at + 28:at + 30], "little")
                inflate = zlib.decompressobj(-15)
                assert inflate.decompress(raw[start:start + i.compress_size]) == z.read(i), i.filename
                assert inflate.eof and not inflate.unused_data, i.filename + ": not one whole deflate stream"

        """ + script, path] + arguments
    let pipe = Pipe()
    python.standardOutput = pipe
    try python.run()
    let answer = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    python.waitUntilExit()
    XCTAssertEqual(python.terminationStatus, 0, "Python could not read \(path)", file: file, line: line)
    return answer
}
