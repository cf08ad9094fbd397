#if canImport(CoreData)
import CoreData
import Foundation
import LarderClient
import LarderXCTest
import XCTest

/// The Core Data variant of `SnapshotCheckTests` (Apple platforms only; the
/// Linux suite runs the GRDB one): old stores written by v1 of the model are
/// migrated by Core Data's lightweight migration (an inferred mapping model)
/// and judged against a fresh store of v2. The models are built in code so
/// the example needs no .xcdatamodeld; an app passes its own.
final class CoreDataSnapshotTests: XCTestCase {
    static func model(_ version: Int) -> NSManagedObjectModel {
        func attribute(_ name: String, _ type: NSAttributeType, optional: Bool = true) -> NSAttributeDescription {
            let a = NSAttributeDescription()
            a.name = name
            a.attributeType = type
            a.isOptional = optional
            return a
        }
        let artist = NSEntityDescription()
        artist.name = "Artist"
        artist.managedObjectClassName = NSStringFromClass(NSManagedObject.self)
        artist.properties = [attribute("name", .stringAttributeType, optional: false), attribute("born", .integer64AttributeType)]
            + (version >= 2 ? [attribute("country", .stringAttributeType)] : [])
        let model = NSManagedObjectModel()
        model.entities = [artist]
        return model
    }

    /// Lightweight migration of the store at `path` from v1 to v2, in place.
    static func migrate(_ path: String) throws {
        let url = URL(fileURLWithPath: path)
        let (v1, v2) = (model(1), model(2))
        let mapping = try NSMappingModel.inferredMappingModel(forSourceModel: v1, destinationModel: v2)
        let migrated = url.deletingLastPathComponent().appendingPathComponent("migrated-\(UUID().uuidString).sqlite")
        try NSMigrationManager(sourceModel: v1, destinationModel: v2)
            .migrateStore(from: url, sourceType: NSSQLiteStoreType, options: nil, with: mapping,
                          toDestinationURL: migrated, destinationType: NSSQLiteStoreType, destinationOptions: nil)
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: v2)
        try coordinator.replacePersistentStore(at: url, destinationOptions: nil, withPersistentStoreFrom: migrated,
                                               sourceOptions: nil, ofType: NSSQLiteStoreType)
        try coordinator.destroyPersistentStore(at: migrated, ofType: NSSQLiteStoreType, options: nil)
    }

    /// A store of `version` at `path`, with `artists` in it, closed.
    static func makeStore(_ path: String, version: Int, artists: [(String, Int)] = []) throws {
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model(version))
        let store = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: nil, at: URL(fileURLWithPath: path), options: nil)
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        try context.performAndWait {
            for (name, born) in artists {
                let artist = NSManagedObject(entity: coordinator.managedObjectModel.entitiesByName["Artist"]!, insertInto: context)
                artist.setValue(name, forKey: "name")
                artist.setValue(born, forKey: "born")
            }
            try context.save()
        }
        try coordinator.remove(store)
    }

    func testOldStoresMigrateToTheNewestModel() async throws {
        let client = ClientTestServer.client
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coredata-snapshots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Self.makeStore(folder.appendingPathComponent("v1.sqlite").path, version: 1, artists: [("Hilma af Klint", 1862), ("Emma Kunz", 1892)])
        let key = try await client.build(key: "coredata-v2") { path in try Self.makeStore(path, version: 2) }
        let results = try await LarderSnapshots(client: client).check(in: folder, against: .build(key)) { path in try Self.migrate(path) }
        XCTAssertEqual(results.map(\.passed), [true])
    }
}
#endif
