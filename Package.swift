// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Larder",
    // iOS and the others: for apps' test targets using LarderClient (the
    // server itself is for macOS and Linux).
    platforms: [.macOS(.v14), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .executable(name: "larder", targets: ["larder"]),
        // For apps' test targets: the HTTP client alone (Foundation only), and
        // an XCTest base class giving each test a store.
        .library(name: "LarderClient", targets: ["LarderClient"]),
        .library(name: "LarderXCTest", targets: ["LarderXCTest"]),
    ],
    dependencies: [
        // The command line (`larder serve`, `larder check`).
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // Logging: the ecosystem's API (levels, metadata, pluggable handlers), so
        // an embedding app or a test can route Larder's logs where it wants.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Tests only: an app's own migrator (GRDB's DatabaseMigrator) for the
        // snapshot checks' tests, a stand-in for Core Data that runs on Linux.
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CSystem"),
        // libcurl, loaded when a bucket is named (its headers from Debian's libcurl4-openssl-dev;
        // not linked: its libraries stay out of every install that names no bucket).
        .target(name: "CCurl"),
        // Trimming and fixed-point numbers without Foundation (which would link ICU).
        // The C library for every other module (Glibc here; Darwin is not built yet: docs/macos.md),
        // and the switch to the portable stand-ins of Linux's own calls.
        .target(name: "Platform"),
        .target(name: "Text", dependencies: ["Platform"]),
        // SQLite's system calls as Larder gives them (non-blocking opens, the temporary files' budget): C, one state per process.
        .target(name: "CSQLiteHooks", dependencies: ["CSQLite"]),
        .target(name: "SQLite", dependencies: ["CSQLite", "CSQLiteHooks", "Platform", "Text"]),
        // Who owns a loopback connection's other end (sock_diag, /proc/net/tcp): C, apart from libmicrohttpd's header.
        .target(name: "CPeerUser"),
        .target(name: "MicroHTTP", dependencies: ["CMicroHTTPD", "CPeerUser", "FileSystem", "Platform", "Text"]),
        .target(name: "Digest", dependencies: ["CSystem"]),
        .target(name: "FileSystem", dependencies: ["CSystem", "Platform"]),
        .target(name: "Zip", dependencies: ["CSystem", "Digest", "Platform"]),
        // The fleet's buckets: S3's REST API through libcurl.
        .target(name: "ObjectStore", dependencies: ["CCurl", "Digest", "Platform"]),
        .target(name: "LarderCore", dependencies: ["SQLite", "FileSystem", "Digest", "Zip", "Text", "ObjectStore"]),
        .target(name: "LarderServer", dependencies: ["LarderCore", "MicroHTTP", "Zip", "FileSystem", "Digest", "Text", "ObjectStore", .product(name: "Logging", package: "swift-log")],
                // The dashboard's style and script, compiled in as bytes: the binary needs no bundle beside it.
                resources: [.embedInCode("Dashboard/dashboard.css"), .embedInCode("Dashboard/dashboard.js")]),
        .executableTarget(name: "larder", dependencies: [
            "LarderServer", "LarderCore", "MicroHTTP", "FileSystem", "Platform", "Text", "ObjectStore", "Zip",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The client: no dependency on the server's modules.
        .target(name: "LarderClient"),
        .target(name: "LarderXCTest", dependencies: ["LarderClient"]),
        // What the test targets share: scratch directories, the test server, assertions.
        .target(name: "TestSupport", dependencies: ["LarderCore", "LarderServer", "SQLite"], path: "Tests/TestSupport"),
        .testTarget(name: "SQLiteTests", dependencies: ["SQLite", "TestSupport"]),
        .testTarget(name: "MicroHTTPTests", dependencies: ["MicroHTTP", "Platform"]),
        .testTarget(name: "LarderCoreTests", dependencies: ["LarderCore", "SQLite", "FileSystem", "Digest", "Platform", "TestSupport", "ObjectStore", "Zip"]),
        .testTarget(name: "ZipTests", dependencies: ["Zip", "Digest", "TestSupport"]),
        .testTarget(name: "FileSystemTests", dependencies: ["FileSystem", "Platform"]),
        .testTarget(name: "TextTests", dependencies: ["Text"]),
        // The repository's own rules: licence headers, what each module imports.
        .testTarget(name: "RepositoryTests"),
        .testTarget(name: "LarderServerTests", dependencies: ["LarderServer", "MicroHTTP", "LarderCore", "Platform", "SQLite", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "LarderClientTests", dependencies: ["LarderClient", "LarderXCTest", "SQLite", "TestSupport",
                                                             .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "EndToEndTests", dependencies: ["LarderServer", "LarderCore", "SQLite", "Digest", "FileSystem", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
