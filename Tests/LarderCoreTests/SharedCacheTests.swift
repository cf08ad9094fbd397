import Dispatch
import FileSystem
import Foundation
import LarderCore
import ObjectStore
import SQLite
import TestSupport
import XCTest

/// A template cache folder shared by servers on other roots, at once and
/// run after run (`--cache-dir`, what `larder up` keeps in ~/.cache).
final class SharedCacheTests: XCTestCase {
    func core(_ scratch: Scratch, cache: String) throws -> CoreServices {
        try CoreServices(scratch) { $0.cacheDirectory = cache }
    }

    func testAKeyIsBuiltOnceByServersSharingTheFolderAtOnce() throws {
        let shared = Scratch(), one = Scratch(), two = Scratch()
        let cores = try [core(one, cache: shared.path), core(two, cache: shared.path)]
        let failures = Flag()
        let provisioners = cores.map(\.provisioner)
        var request = Provisioner.Request()
        request.template = "gallery"
        request.fixtures = ["artists", "artworks"]
        let plans = try provisioners.map { try $0.plan(request) }
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            do { _ = try provisioners[i % 2].create(plans[i % 2], label: nil, ttlSeconds: nil) } catch { failures.set() }
        }
        XCTAssertFalse(failures.isSet)
        XCTAssertEqual(cores.map { $0.provisioner.cache.stats.built }.reduce(0, +), 1)
        let origins = cores.flatMap { $0.provisioner.cache.entries(prefix: "").map(\.origin) }
        XCTAssertEqual(Set(origins), [.built, .machine])
        XCTAssertEqual(FileSystem.entries(shared.path).filter { $0.hasSuffix(".sqlite") }.count, 1)
        XCTAssertEqual(FileSystem.entries(shared.path + "/locks"), [], "each key's lock file goes with its holder")
    }

    func testALaterRunOnAnotherRootBuildsNothing() throws {
        let shared = Scratch(), first = Scratch(), second = Scratch()
        do {
            let core = try core(first, cache: shared.path)
            _ = try core.store("gallery")
            XCTAssertEqual(core.provisioner.cache.stats.built, 1)
            core.registry.close()
        }
        let again = try core(second, cache: shared.path)
        let store = try again.store("gallery")
        XCTAssertEqual(again.provisioner.cache.stats.built, 0)
        XCTAssertEqual(again.provisioner.cache.entries(prefix: "").first?.origin, .machine)
        XCTAssertEqual(try store.connect().scalar("PRAGMA journal_mode")?.string, "wal")
    }

    /// Another server evicted the entry a store is asked of: it is brought in again, never an error.
    func testAnEntryAnotherServerRemovedIsMadeAgain() throws {
        let shared = Scratch(), one = Scratch(), two = Scratch()
        let a = try core(one, cache: shared.path), b = try core(two, cache: shared.path)
        _ = try a.store("gallery")
        _ = try b.store("gallery")
        let key = try XCTUnwrap(a.provisioner.cache.entries(prefix: "").first?.key)
        XCTAssertTrue(a.provisioner.cache.remove(key))
        XCTAssertNoThrow(try b.store("gallery"))
        XCTAssertEqual(b.provisioner.cache.stats.built, 1)
    }

    /// Least recently used out first, by every server's use: the other server's recent use counts.
    func testEvictionKeepsTheFolderWithinItsBudget() throws {
        let shared = Scratch(), one = Scratch()
        let a = try CoreServices(one) { c in
            c.cacheDirectory = shared.path
            c.cacheMaxBytes = 1 // every new entry pushes the others out
        }
        _ = try a.store("gallery")
        _ = try a.store("boardgames")
        XCTAssertEqual(FileSystem.entries(shared.path).filter { $0.hasSuffix(".sqlite") }.count, 1)
        XCTAssertEqual(a.provisioner.cache.stats.entries, 1)
    }

    /// The key names what went in, never where the checkout is: runners of a fleet each have their own folder.
    func testTheKeyNamesNoMachinePath() throws {
        let here = Scratch(), there = Scratch()
        for scratch in [here, there] {
            try FileManager.default.copyItem(atPath: sampleFixtures + "/gallery", toPath: scratch.path + "/gallery")
        }
        func key(_ scratch: Scratch) throws -> String {
            let core = try CoreServices(Scratch(), fixtures: scratch.path)
            var request = Provisioner.Request()
            request.template = "gallery"
            request.fixtures = ["artists"]
            return try core.provisioner.plan(request).key
        }
        XCTAssertEqual(try key(here), try key(there))
        // A file's name is what its tool records: renamed, it is another entry.
        let folder = there.path + "/gallery/migrations"
        try FileManager.default.moveItem(atPath: folder + "/0001_create_artists.sql", toPath: folder + "/0001_make_artists.sql")
        XCTAssertNotEqual(try key(here), try key(there))
    }

    func testBucketURLsAreCheckedAndNeverCarryCredentials() throws {
        let url = try BucketURL("s3://ci-cache/larder/main/")
        XCTAssertEqual(url.bucket, "ci-cache")
        XCTAssertEqual(url.prefix, "larder/main")
        XCTAssertEqual(url.key("manifests/k.json"), "larder/main/manifests/k.json")
        XCTAssertEqual(try BucketURL("s3://ci-cache").key("x"), "x")
        for bad in ["s3://AKIA:secret@ci-cache/p", "https://ci-cache/p", "s3://ci/p", "s3://ci-cache/a b", "s3://ci-cache/../x"] {
            XCTAssertThrowsError(try BucketURL(bad), bad)
        }
        var c = Configuration()
        XCTAssertThrowsError(try c.apply(arguments: ["--cache-url", "s3://key:secret@bucket/p"])) { error in
            XCTAssertFalse("\(error)".contains("secret"), "the refusal repeats no credentials")
        }
    }

    func testCacheReadOnlyIsAFlag() throws {
        var c = Configuration()
        try c.apply(arguments: ["--cache-read-only", "--cache-timeout-ms", "500"])
        XCTAssertTrue(c.cacheReadOnly)
        XCTAssertEqual(c.cacheTimeoutMs, 500)
        try c.apply(arguments: ["--cache-read-only=false"])
        XCTAssertFalse(c.cacheReadOnly)
        XCTAssertTrue(try Configuration.fromEnvironment(["LARDER_CACHE_READ_ONLY": "true"]).cacheReadOnly)
        XCTAssertThrowsError(try Configuration.fromEnvironment(["LARDER_CACHE_READ_ONLY": "maybe"]))
    }
}
