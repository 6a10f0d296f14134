import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Crate: ManagedObject {
    @Attribute(unique: true) var code: String = ""
    @Attribute var label: String?
    @Attribute var weight: Int32 = 0
    @Relationship(inverse: "crates") var dock: Dock?
}

private final class Dock: ManagedObject {
    @Attribute(unique: true) var name: String = ""
    @Relationship(inverse: "dock") var crates: Set<Crate>
}

/// `SavePipeline.keyedInsertGroups`: keyed inserts grouped by the columns an existing row
/// takes on a conflict. No server here.
@Suite("Keyed inserts grouped by shape without a server")
struct KeyedInsertGroupsTests {
    let model: Model

    init() throws {
        model = try Model(entities: [Crate.self, Dock.self])
    }

    /// A new keyed insert of `code`, with what the closure sets.
    private func crate(_ code: String, keepsExisting: Bool = false, _ set: (Crate) -> Void = { _ in }) throws -> Crate {
        let entity = try #require(model.entity(for: Crate.self))
        let object = Crate()
        object.entityStorage = entity
        object.prepareStorage()
        object.code = code
        set(object)
        object.storage.markKeyedInsert(attribute: try #require(entity.attribute(named: "code")).index, keepsExisting: keepsExisting)
        return object
    }

    @Test func objectsOfOneShapeShareAGroupInOrderOfFirstAppearance() throws {
        let entity = try #require(model.entity(for: Crate.self))
        let label = try #require(entity.attribute(named: "label")).index
        let weight = try #require(entity.attribute(named: "weight")).index
        let dock = try #require(entity.relationship(named: "dock")).index
        let a = try crate("a") { $0.label = "A" }
        let b = try crate("b") { $0.label = "B"; $0.weight = 3 }
        let c = try crate("c") { $0.label = "C" }
        let d = try crate("d")  // only its key: a stub
        let e = try crate("e", keepsExisting: true) { $0.label = "E"; $0.weight = 9 }  // takes nothing
        let f = try crate("f") { $0.weight = 0 }  // the default: not a change of shape
        let g = try crate("g") { $0.label = "G"; $0.weight = 4 }
        let docked = try crate("h") { $0.setReference(.key(7), at: dock) }
        let code = try #require(entity.attribute(named: "code")).index
        let objects = [a, b, c, d, e, f, g, docked]
        // Both ways of finding shapes (bit masks up to 64 properties, arrays beyond) alike.
        for groups in [
            SavePipeline.keyedInsertGroups(objects, of: entity), SavePipeline.keyedInsertGroupsByMask(objects, of: entity),
            SavePipeline.keyedInsertGroupsByIndexes(objects, of: entity),
        ] {
            #expect(groups.map(\.shape.unique) == Array(repeating: code, count: 4))
            #expect(groups.map(\.shape.attributes) == [[label], [label, weight].sorted(), [], []])
            #expect(groups.map(\.shape.toOne) == [[], [], [], [dock]])
            #expect(groups.map { $0.members.map { ($0 as? Crate)?.code ?? "?" } } == [["a", "c"], ["b", "g"], ["d", "e", "f"], ["h"]])
        }
    }

    @Test func objectsThatAreNotKeyedInsertsAreLeftOut() throws {
        let entity = try #require(model.entity(for: Crate.self))
        let plain = Crate()
        plain.entityStorage = entity
        plain.prepareStorage()
        let keyed = try crate("k")
        #expect(SavePipeline.keyedInsertGroups([plain, keyed], of: entity).map { $0.members.map { ($0 as? Crate)?.code ?? "?" } } == [["k"]])
    }
}
