import Foundation
import XCTest

/// What each module may import: the layers of docs/layout.md, kept by the build.
final class ImportTests: XCTestCase {
    let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// The server and its command line import FoundationEssentials, never all
    /// of Foundation, which links ICU's data into the binary (the package
    /// test checks the binary itself). The clients, for apps' tests, keep
    /// Foundation's URLSession.
    func testServerModulesImportFoundationEssentialsOnly() throws {
        let clients: Set<String> = ["LarderClient", "LarderXCTest"]
        let files = try XCTUnwrap(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") && !clients.contains(String($0.prefix { $0 != "/" })) }
        XCTAssertGreaterThan(files.count, 100)
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.contains(" import ") {
                let module = line.split(separator: " ").last.map(String.init) ?? ""
                XCTAssertFalse(["Foundation", "FoundationNetworking", "FoundationXML", "FoundationInternationalization"].contains(module),
                               "Sources/\(file): \(line) (use FoundationEssentials, FileSystem's Threads or Text)")
            }
        }
    }

    /// The C library is imported in one place, `Sources/Platform`, for
    /// every module and test: a port to another system changes that file,
    /// not every module's imports (docs/macos.md). Nor is a C function
    /// named by its library elsewhere (`Glibc.rename`: `Platform.rename`).
    func testOnlyPlatformImportsTheCLibrary() throws {
        let top = sources.deletingLastPathComponent()
        let libraries = ["Glibc", "Darwin", "Musl", "Bionic", "ucrt", "WinSDK"]
        let qualified = "(^|[^A-Za-z0-9_.])(" + libraries.joined(separator: "|") + ")\\.[A-Za-z_]"
        var checked = 0
        for folder in ["Sources", "Tests"] {
            let root = top.appendingPathComponent(folder)
            let files = try XCTUnwrap(FileManager.default.enumerator(atPath: root.path)).compactMap { $0 as? String }
                .filter { $0.hasSuffix(".swift") && !$0.hasPrefix("Platform/") }
            for file in files {
                checked += 1
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    let words = line.split(whereSeparator: \.isWhitespace)
                    // `import M`, `@_exported import M`, `import func M.f`: the module is the last word's first part.
                    if let at = words.firstIndex(of: "import"), words[..<at].allSatisfy({ $0.hasPrefix("@") }), let last = words.last {
                        let module = String(last.prefix { $0 != "." })
                        XCTAssertFalse(libraries.contains(module), "\(folder)/\(file): \(line) (import Platform instead)")
                    }
                    XCTAssertFalse(line.range(of: qualified, options: .regularExpression) != nil, "\(folder)/\(file): \(line) (the bare name)")
                }
            }
        }
        XCTAssertGreaterThan(checked, 200)
    }

    /// The core and the server's routes call the system only through
    /// FileSystem, SQLite, MicroHTTP and the other modules below them.
    func testTheCoreAndTheServerImportNoCModule() throws {
        for module in ["LarderCore", "LarderServer"] {
            let folder = sources.appendingPathComponent(module)
            let files = try XCTUnwrap(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
            XCTAssertGreaterThan(files.count, 10)
            for file in files {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") where line.hasPrefix("import ") {
                    let name = String(line.dropFirst("import ".count))
                    XCTAssertFalse(["Glibc", "Darwin", "Musl"].contains(name) || name.hasPrefix("C"), "Sources/\(module)/\(file): \(line)")
                }
            }
        }
    }
}
