import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Shelf: ManagedObject {
    @Attribute(unique: true) var label: String = ""
    @Relationship(inverse: "shelf") var volumes: Set<Volume>
}

private final class Volume: ManagedObject {
    @Attribute var title: String = ""
    @Attribute var pages: Int32 = 0
    @Relationship(inverse: "volumes") var shelf: Shelf?
}

private final class Branch: ManagedObject {
    @Attribute(unique: true) var code: String = ""
    @Relationship(inverse: "children") var parent: Branch?
    @Relationship(inverse: "parent") var children: Set<Branch>
}

/// `SavePlan` decides a save's statements from object states alone: no server here.
@Suite("Save planning without a server")
struct SavePlanTests {
    let model: Model

    init() throws {
        model = try Model(entities: [Volume.self, Shelf.self, Branch.self])
    }

    /// A new object of the model's entity.
    private func new<T: ManagedObject>(_ type: T.Type) throws -> T {
        let object = T()
        let entity = try #require(model.entity(for: T.self))
        object.entityStorage = entity
        object.prepareStorage()
        return object
    }

    /// An object as fetched: a permanent ID, a snapshot equal to its values.
    private func fetched<T: ManagedObject>(_ type: T.Type, key: Int64) throws -> T {
        let object = try new(type)
        object.objectID = ObjectID(entityName: object.entity.name, primaryKey: key)
        object.storage.applyFetched(version: 7, values: object.storage.runValues)
        object.storage.replaceCommittedKeys(Array(repeating: nil, count: object.entity.relationships.count))
        return object
    }

    private func plan(
        inserted: Set<ManagedObject> = [], changed: Set<ManagedObject> = [], deleted: Set<ManagedObject> = [],
        overwrite: Set<ObjectIdentifier> = [], reservedKeys: [ObjectIdentifier: Int64] = [:], keysChanged: Bool = false
    ) -> SavePlan {
        SavePlan(
            model: model, inserted: inserted, changed: changed, deleted: deleted, overwrite: overwrite,
            reservedKeys: reservedKeys, keyedInsertKeysChanged: keysChanged)
    }

    @Test func insertsGoParentsFirstAndReserveKeysForPlainObjects() throws {
        let volumes = try (0..<3).map { _ in try new(Volume.self) }
        let shelf = try new(Shelf.self)
        let plan = plan(inserted: Set(volumes + [shelf]))
        #expect(plan.inserts.map(\.entity.name) == ["Shelf", "Volume"])
        #expect(plan.inserts[0].plain == [shelf])
        #expect(Set(plan.inserts[1].plain) == Set(volumes))
        #expect(plan.inserts.map(\.needingKeys.count) == [1, 3])
        #expect(plan.inserts.map(\.keyed.isEmpty) == [true, true])
        #expect(plan.updates.isEmpty && plan.deletes.isEmpty)
    }

    @Test func keysReservedByAnEarlierAttemptAreNotReservedAgain() throws {
        let first = try new(Volume.self)
        let second = try new(Volume.self)
        let plan = plan(inserted: [first, second], reservedKeys: [ObjectIdentifier(first): 41])
        #expect(plan.inserts.map(\.needingKeys) == [[second]])
    }

    @Test func keyedInsertsTakeTheirKeysFromTheirUpsert() throws {
        let label = try #require(model.entity(for: Shelf.self)?.attribute(named: "label")).index
        let keyed = try new(Shelf.self)
        keyed.storage.initialize(.string("A"), at: label)
        keyed.storage.markKeyedInsert(attribute: label, keepsExisting: false)
        let plain = try new(Shelf.self)
        let inserts = try #require(plan(inserted: [keyed, plain]).inserts.first)
        #expect(inserts.keyed == [keyed])
        #expect(inserts.plain == [plain])
        #expect(inserts.needingKeys == [plain])
    }

    @Test func keyedInsertsOfASelfReferencingEntityReserveKeys() throws {
        let code = try #require(model.entity(for: Branch.self)?.attribute(named: "code")).index
        let branch = try new(Branch.self)
        branch.storage.initialize(.string("root"), at: code)
        branch.storage.markKeyedInsert(attribute: code, keepsExisting: false)
        let inserts = try #require(plan(inserted: [branch]).inserts.first)
        #expect(inserts.keyed == [branch])
        #expect(inserts.needingKeys == [branch])
    }

    @Test func aKeyTwiceAfterKeysChangedMakesOnePlainInsert() throws {
        let label = try #require(model.entity(for: Shelf.self)?.attribute(named: "label")).index
        let shelves = try (0..<2).map { _ in try new(Shelf.self) }
        for shelf in shelves {
            shelf.storage.initialize(.string("same"), at: label)
            shelf.storage.markKeyedInsert(attribute: label, keepsExisting: false)
        }
        let unchecked = try #require(plan(inserted: Set(shelves)).inserts.first)
        #expect(unchecked.keyed.count == 2 && unchecked.plain.isEmpty)
        let checked = try #require(plan(inserted: Set(shelves), keysChanged: true).inserts.first)
        #expect(checked.keyed.count == 1 && checked.plain.count == 1)
        #expect(checked.needingKeys == checked.plain)
    }

    @Test func updatesAreGroupedByTheColumnsTheyWrite() throws {
        let entity = try #require(model.entity(for: Volume.self))
        let title = try #require(entity.attribute(named: "title")).index
        let pages = try #require(entity.attribute(named: "pages")).index
        let retitled = try (1...3).map { key in try fetched(Volume.self, key: key) }
        for volume in retitled { volume.storage.initialize(.string("new"), at: title) }
        let longer = try fetched(Volume.self, key: 4)
        longer.storage.initialize(.int32(100), at: pages)
        let forced = try fetched(Volume.self, key: 5)
        forced.storage.initialize(.string("mine"), at: title)
        let untouched = try fetched(Volume.self, key: 6)
        let inserted = try new(Volume.self)
        let deleted = try fetched(Volume.self, key: 8)
        deleted.storage.initialize(.string("gone"), at: title)

        let plan = plan(
            inserted: [inserted], changed: Set(retitled + [longer, forced, untouched, inserted, deleted]),
            deleted: [deleted], overwrite: [ObjectIdentifier(forced)])
        #expect(plan.updates.map(\.shape.attributeIndexes) == [[title], [pages], Array(entity.attributes.indices)])
        #expect(plan.updates.map(\.shape.overwrite) == [false, false, true])
        #expect(plan.updates.map(\.shape.toOneIndexes) == [[], [], entity.toOneIndexes])
        #expect(Set(plan.updates[0].objects) == Set(retitled))
        #expect(plan.updates[1].objects == [longer])
        #expect(plan.updates[2].objects == [forced])
    }

    @Test func aChangedToOneRelationshipIsAnUpdateColumn() throws {
        let entity = try #require(model.entity(for: Volume.self))
        let shelfIndex = try #require(entity.relationship(named: "shelf")).index
        let volume = try fetched(Volume.self, key: 1)
        volume.setReference(.key(9), at: shelfIndex)
        let update = try #require(plan(changed: [volume]).updates.first)
        #expect(update.shape.attributeIndexes.isEmpty)
        #expect(update.shape.toOneIndexes == [shelfIndex])
    }

    @Test func deletesGoChildrenFirstCheckedBeforeForced() throws {
        let shelf = try fetched(Shelf.self, key: 1)
        let checked = try fetched(Volume.self, key: 2)
        let forced = try fetched(Volume.self, key: 3)
        let plan = plan(deleted: [shelf, checked, forced], overwrite: [ObjectIdentifier(forced)])
        #expect(plan.deletes.map(\.entity.name) == ["Volume", "Shelf"])
        #expect(plan.deletes[0].objects == [checked, forced])
        #expect(plan.deletes[0].batches.map(\.checksVersion) == [true, false])
        #expect(plan.deletes[0].batches.map(\.objects) == [[checked], [forced]])
        #expect(plan.deletes[1].batches.map(\.checksVersion) == [true])
        #expect(plan.inserts.isEmpty && plan.updates.isEmpty)
    }
}
