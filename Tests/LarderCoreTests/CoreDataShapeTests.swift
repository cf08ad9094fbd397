import FileSystem
import Digest
import Foundation
@testable import LarderCore
import SQLite
import TestSupport
import XCTest
import Zip

/// Core Data's files as Core Data writes them (issue 47), made here in the
/// shape Apple documents (tables and columns as Core Data names them, a
/// binary plist in `Z_METADATA`), not by Core Data, which Linux lacks.
final class CoreDataShapeTests: XCTestCase {
    /// The metadata plist Core Data keeps in `Z_METADATA`.
    static func plist(identifiers: [String] = [""], checksum: String? = nil, hashes: [String: [UInt8]] = ["Artist": [1, 2, 3]],
                      uuid: String = UUID().uuidString) throws -> [UInt8] {
        var metadata: [String: Any] = [
            "NSStoreModelVersionIdentifiers": identifiers,
            "NSStoreModelVersionHashes": hashes.mapValues { Data($0) },
            "NSStoreType": "SQLite",
            "NSStoreUUID": uuid,
            "NSPersistenceFrameworkVersion": 1414,
        ]
        if let checksum { metadata["NSStoreModelVersionChecksumKey"] = checksum }
        return Array(try PropertyListSerialization.data(fromPropertyList: metadata, format: .binary, options: 0))
    }

    /// A Core Data-shaped store at `path`, version 1 of the model (artists
    /// with a name), history tracking on, in WAL mode as Core Data keeps it.
    static func makeStore(_ path: String, plist: [UInt8], artists: [String]) throws {
        let db = try Connection(path: path, mode: .readWriteCreate)
        try db.execute("""
            PRAGMA journal_mode=WAL;
            CREATE TABLE ZARTIST (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR);
            CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
            CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
            CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB);
            CREATE TABLE ATRANSACTIONSTRING (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR);
            CREATE TABLE ATRANSACTION (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHORTS INTEGER, ZTIMESTAMP FLOAT);
            CREATE TABLE ACHANGE (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCHANGETYPE INTEGER, ZENTITY INTEGER, ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER);
            INSERT INTO Z_PRIMARYKEY VALUES (1, 'Artist', 0, 0);
            """)
        try db.run("INSERT INTO Z_METADATA VALUES (1, 'uuid', ?)", [.blob(plist)])
        for name in artists { try save(db, name) }
    }

    /// One save as Core Data makes it: the row, its key, history.
    static func save(_ db: Connection, _ name: String) throws {
        try db.execute("BEGIN; UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_ENT = 1")
        try db.run("INSERT INTO ZARTIST VALUES ((SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = 1), 1, 1, ?)", [.text(name)])
        try db.execute("""
            INSERT INTO ATRANSACTION (Z_ENT, Z_OPT, ZTIMESTAMP) VALUES (16001, 1, 0);
            INSERT INTO ACHANGE (Z_ENT, Z_OPT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID) VALUES (16002, 1, 0, 1, last_insert_rowid(), 1);
            COMMIT;
            """)
    }

    func version(_ plist: [UInt8]) throws -> String? {
        let scratch = Scratch()
        let path = scratch.path + "/Model.sqlite"
        try Self.makeStore(path, plist: plist, artists: [])
        return try Bookkeeping.read(try Connection(path: path, mode: .readOnly), preferring: nil).current
    }

    /// The model's version identifiers, else the checksum, else a digest of
    /// the entity hashes alone: the same model is the same version whatever
    /// the store's UUID.
    func testTheModelVersionComesFromTheMetadataPlist() throws {
        XCTAssertEqual(try version(Self.plist(identifiers: ["2.1"], checksum: "abc=")), "2.1")
        XCTAssertEqual(try version(Self.plist(identifiers: [""], checksum: "Q1JNZGF0YQ==")), "Q1JNZGF0YQ==")
        let one = try version(Self.plist(hashes: ["Artist": [1, 2, 3], "Album": [9]]))
        XCTAssertEqual(one, try version(Self.plist(hashes: ["Album": [9], "Artist": [1, 2, 3]])), "another UUID, the same model")
        XCTAssertNotEqual(one, try version(Self.plist(hashes: ["Artist": [1, 2, 4], "Album": [9]])))
        XCTAssertTrue(one?.hasPrefix("hashes-") == true, one ?? "nil")
        XCTAssertNil(CoreData.modelVersion(plist: Array("not a plist at all".utf8)))
        XCTAssertNil(CoreData.modelVersion(plist: [0x62, 0x70, 0x6C, 0x69, 0x73, 0x74, 0x30, 0x30, 0xFF, 0xFF]), "a truncated binary plist")
    }

    /// Core Data's own tables are never data, nor is `Z_OPT`: uploaded with
    /// its WAL, the store's counts name the entity tables only and its
    /// version is the model's; later saves show as what they are.
    func testBookkeepingIsHiddenAndZOPTIsNoUpdate() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let local = scratch.path + "/Model.sqlite"
        try Self.makeStore(local, plist: try Self.plist(identifiers: ["1.0"]), artists: ["Hilma af Klint", "Emma Kunz"])
        let app = try Connection(path: local, mode: .readWrite) // still open: the last saves are in the -wal
        try app.execute("PRAGMA wal_autocheckpoint=0")
        try Self.save(app, "Sonia Delaunay")
        var files: [(String, [UInt8])] = []
        for suffix in ["", "-wal"] { files.append(("Model.sqlite" + suffix, try FileSystem.readFile(local + suffix))) }
        var bundle: [UInt8] = []
        let writer = ZipWriter { bundle += $0 }
        for (name, bytes) in files { try writer.add(name: name, bytes: bytes, method: .store) }
        try writer.finish()
        let (store, provenance) = try core.provisioner.createFromUpload(.bytes(bundle), format: .zip, template: nil, version: nil, label: nil, ttlSeconds: nil)
        XCTAssertEqual(provenance.version, "1.0")
        XCTAssertEqual(try store.counts().map(\.0), ["ZARTIST"])
        XCTAssertEqual(try store.counts().first?.1, 3, "the save in the -wal arrived")

        // The test saves again: Z_OPT bumps on an unchanged row, keys and history churn.
        let live = try Connection(path: store.databasePath, mode: .readWrite)
        try live.execute("UPDATE ZARTIST SET Z_OPT = Z_OPT + 1 WHERE Z_PK = 1; UPDATE ZARTIST SET ZNAME = 'Emma Kunz (1892)', Z_OPT = Z_OPT + 1 WHERE Z_PK = 2")
        try Self.save(live, "Paula Rego")
        let diff = try store.diff()
        XCTAssertEqual(diff.tables.map(\.0), ["ZARTIST"])
        let artists = try XCTUnwrap(diff.tables.first?.1)
        XCTAssertEqual([artists.inserted, artists.updated, artists.deleted], [1, 1, 0], "the Z_OPT-only change is no update")
    }

    /// Data kept ignores `Z_OPT`; an app check names the model versions.
    func testAnAppCheckOfACoreDataStoreNamesItsModelVersions() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        // The reference: version 2 of the model, made fresh by "the app".
        guard case .build(let info) = try core.builds.claim(key: "model-2", label: nil), let buildPath = info.path else { return XCTFail("not claimed") }
        try Self.makeStore(buildPath, plist: try Self.plist(identifiers: ["2.0"]), artists: [])
        try Self.migrateToV2(try Connection(path: buildPath, mode: .readWrite))
        _ = try core.builds.finish("model-2")

        let old = scratch.path + "/v1.sqlite"
        try Self.makeStore(old, plist: try Self.plist(identifiers: ["1.0"]), artists: ["Hilma af Klint", "Emma Kunz"])
        let (store, _) = try core.provisioner.createFromUpload(.bytes(try Self.whole(old)), template: nil, version: nil, label: nil, ttlSeconds: nil)
        // The app migrates a copy of its own, and checks it in; Core Data rewrites every row's Z_OPT.
        let local = scratch.path + "/local.sqlite"
        try FileSystem.copyFile(from: store.databasePath, to: local)
        let app = try Connection(path: local, mode: .readWrite)
        try Self.migrateToV2(app)
        try app.execute("UPDATE ZARTIST SET Z_OPT = NULL")
        _ = try core.editor.checkIn(store.id, .bytes(try Self.whole(local)), format: .database, maxBytes: 1 << 30)
        let report = try AppMigrationCheck(provisioner: core.provisioner, builds: core.builds)
            .judge(store.id, against: .build("model-2"), snapshot: "v1.sqlite", expect: nil)
        XCTAssertEqual(report.failures, [])
        XCTAssertEqual(report.fromVersion, "1.0")
        XCTAssertEqual(report.toVersion, "2.0")
    }

    /// Version 2 of the model: artists gain a birth year.
    static func migrateToV2(_ db: Connection) throws {
        try db.execute("ALTER TABLE ZARTIST ADD COLUMN ZBORN INTEGER")
        try db.run("UPDATE Z_METADATA SET Z_PLIST = ?", [.blob(try plist(identifiers: ["2.0"]))])
    }

    /// The database at `path` as one file's bytes (its WAL checkpointed).
    static func whole(_ path: String) throws -> [UInt8] {
        try Connection(path: path, mode: .readWrite).execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return try FileSystem.readFile(path)
    }

    // MARK: Snapshots kept in a template folder

    func templateWithSnapshot(_ scratch: Scratch, name: String, make: (String) throws -> Void) throws -> Catalog {
        scratch.write(["0001_artists.sql": "CREATE TABLE artists (id INTEGER PRIMARY KEY, name TEXT);",
                       "0002_born.sql": "ALTER TABLE artists ADD COLUMN born INTEGER;"], under: "fixtures/app/migrations")
        try FileManager.default.createDirectory(atPath: scratch.path + "/fixtures/app/snapshots", withIntermediateDirectories: true)
        try make(scratch.path + "/fixtures/app/snapshots/\(name).sqlite")
        return try Catalog(directory: scratch.path + "/fixtures")
    }

    /// A snapshot kept with its `-wal`: checked with its last writes, the
    /// kept files never written; without one, a WAL-mode header is a note.
    func testASnapshotKeptWithItsWALIsReadWithItsLastWrites() throws {
        let scratch = Scratch()
        var writer: Connection?
        let catalog = try templateWithSnapshot(scratch, name: "v1") { path in
            let db = try Connection(path: path, mode: .readWriteCreate)
            try db.execute("""
                PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
                CREATE TABLE artists (id INTEGER PRIMARY KEY, name TEXT); PRAGMA user_version=1;
                INSERT INTO artists (name) VALUES ('Hilma af Klint'), ('Emma Kunz');
                """)
            writer = db // held open: the rows stay in the -wal, as an app's copy left them
        }
        let folder = scratch.path + "/fixtures/app/snapshots"
        // The files as the app left them: copied while it was running.
        for suffix in ["", "-wal"] { try FileSystem.copyFile(from: folder + "/v1.sqlite" + suffix, to: folder + "/kept.sqlite" + suffix) }
        writer = nil
        _ = writer
        FileSystem.remove(folder + "/v1.sqlite")
        FileSystem.remove(folder + "/v1.sqlite-wal")
        FileSystem.remove(folder + "/v1.sqlite-shm")
        try FileSystem.copyFile(from: folder + "/kept.sqlite", to: folder + "/alone.sqlite")
        scratch.write(["kept.expect.json": #"{"version": 1, "counts": {"artists": 2}}"#,
                       "alone.expect.json": #"{"version": 1}"#], under: "fixtures/app/snapshots")
        let sums = try ["kept.sqlite", "kept.sqlite-wal"].map { SHA256.hex(try FileSystem.readFile(folder + "/" + $0)) }
        let reports = try MigrationCheck(catalog: try Catalog(directory: scratch.path + "/fixtures"), temporaryDirectory: scratch.path).run()
        _ = catalog
        let kept = try XCTUnwrap(reports.first { $0.snapshot == "kept" })
        XCTAssertEqual(kept.failures, [])
        XCTAssertEqual(kept.notes, [])
        let alone = try XCTUnwrap(reports.first { $0.snapshot == "alone" })
        XCTAssertTrue(alone.notes.contains { $0.contains("its last writes may be missing") }, "\(alone.notes)")
        XCTAssertEqual(try ["kept.sqlite", "kept.sqlite-wal"].map { SHA256.hex(try FileSystem.readFile(folder + "/" + $0)) }, sums, "never written")
        XCTAssertFalse(FileSystem.exists(folder + "/kept.sqlite-shm"), "never opened in place")

        // A store of the snapshot carries the WAL's rows too.
        let core = try CoreServices(scratch, fixtures: scratch.path + "/fixtures")
        var request = Provisioner.Request()
        request.template = "app"
        request.snapshot = "kept"
        request.version = "latest"
        let (store, _) = try core.provisioner.create(try core.provisioner.plan(request), label: nil, ttlSeconds: nil)
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: try store.counts())["artists"], 2)
    }

    /// A Core Data snapshot kept among SQL migrations is refused with the
    /// reason, not failed on the migration's CREATE TABLE.
    func testACoreDataSnapshotInASQLTemplateIsRefusedWithTheReason() throws {
        let scratch = Scratch()
        _ = try templateWithSnapshot(scratch, name: "coredata") { path in
            try Self.makeStore(path, plist: try Self.plist(identifiers: ["1.0"]), artists: ["Hilma af Klint"])
            try Connection(path: path, mode: .readWrite).execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE")
        }
        let reports = try MigrationCheck(catalog: try Catalog(directory: scratch.path + "/fixtures"), temporaryDirectory: scratch.path).run()
        let report = try XCTUnwrap(reports.first { $0.snapshot == "coredata" })
        XCTAssertEqual(report.failures.count, 1, "\(report.failures)")
        XCTAssertTrue(report.failures.first?.contains("is a Core Data store: Core Data migrates it") == true, "\(report.failures)")

        let core = try CoreServices(scratch, fixtures: scratch.path + "/fixtures")
        var request = Provisioner.Request()
        request.template = "app"
        request.snapshot = "coredata"
        request.version = "latest"
        XCTAssertLarderError(.migrationFailed, try core.provisioner.create(try core.provisioner.plan(request), label: nil, ttlSeconds: nil)) {
            XCTAssertTrue($0.message.contains("app-migrated snapshot"), $0.message)
        }
        request.version = nil // kept as it is: an app check's starting point
        XCTAssertNoThrow(try core.provisioner.create(try core.provisioner.plan(request), label: nil, ttlSeconds: nil))
    }
}
