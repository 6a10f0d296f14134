import Foundation
import Testing

@testable import PGDataKit

// A hierarchy with a middle entity, inherited relationships of every storage (to-one,
// many-to-many, one-to-one), and a sub-entity's own to-one, under names of their own.

private class HNode: ManagedObject {
    override class var isAbstract: Bool { true }
    override class var tableName: String { "nodes" }
    @Attribute var title: String = ""
    @Relationship(inverse: "nodes") var owner: HOwner?
    @Relationship(inverse: "nodes") var labels: Set<HLabel>
    @Relationship(inverse: "node", column: "cover_id") var cover: HCover?
}

private class HPage: HNode {
    @Attribute var body: String?
}

private final class HLongPage: HPage {
    @Attribute var chapters: Int = 0
}

private final class HClip: HNode {
    @Attribute var seconds: Int = 0
    @Relationship(inverse: "clips") var channel: HChannel?
}

private final class HOwner: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "owner", deleteRule: .cascade) var nodes: Set<HNode>
}

private final class HLabel: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "labels") var nodes: Set<HNode>
}

private final class HCover: ManagedObject {
    @Attribute var url: String = ""
    @Relationship(inverse: "cover") var node: HNode?
}

private final class HChannel: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "channel") var clips: Set<HClip>
}

/// Siblings mapping one column to two types.
private class HBase: ManagedObject {
    override class var isAbstract: Bool { true }
    @Attribute var name: String = ""
}

private final class HLeft: HBase {
    @Attribute var size: Int = 0
}

private final class HRight: HBase {
    @Attribute var size: String = ""
}

/// A property on the discriminator column.
private final class HKind: HBase {
    @Attribute(column: "entity") var kind: String = ""
}

@Suite("Entity inheritance in the model")
struct InheritanceModelTests {
    static let classes: [ManagedObject.Type] = [
        HNode.self, HPage.self, HLongPage.self, HClip.self, HOwner.self, HLabel.self, HCover.self, HChannel.self,
    ]

    @Test func entitiesArePlacedInTheirHierarchy() throws {
        let model = try Model(entities: Self.classes)
        let node = try #require(model.entity(for: HNode.self))
        let page = try #require(model.entity(for: HPage.self))
        let long = try #require(model.entity(for: HLongPage.self))
        let clip = try #require(model.entity(for: HClip.self))
        #expect(node.isAbstract && !page.isAbstract && !long.isAbstract && !clip.isAbstract)
        #expect(node.superentityName == nil && page.superentityName == "HNode" && long.superentityName == "HPage")
        #expect(node.subentityNames == ["HPage", "HClip"] && page.subentityNames == ["HLongPage"])
        for entity in [node, page, long, clip] {
            #expect(entity.tableName == "nodes" && entity.rootEntityName == "HNode")
            #expect(entity.discriminatorColumn == "entity")
        }
        #expect(node.concreteEntityNames == ["HPage", "HLongPage", "HClip"])
        #expect(page.concreteEntityNames == ["HPage", "HLongPage"] && long.concreteEntityNames == ["HLongPage"])
        #expect(long.inheritedAttributeCount == 2 && long.ownAttributes.map(\.name) == ["chapters"])
        #expect(model.entity(for: HOwner.self)?.discriminatorColumn == nil)
        #expect(model.tableNames.filter { $0 == "nodes" }.count == 1)
        #expect(model.isEntity(long, kindOf: "HNode") && !model.isEntity(clip, kindOf: "HPage"))
        #expect(node.description.hasPrefix("abstract HNode(nodes): title: ") && long.description.hasPrefix("HLongPage : HPage(nodes): "))
        #expect(node.discriminatorCondition == nil)
        #expect(page.discriminatorCondition == "t.\"entity\" IN ('HPage', 'HLongPage')")
        #expect(clip.discriminatorCondition == "t.\"entity\" = 'HClip'")
    }

    @Test func inheritedRelationshipsShareTheirDeclaringEntitysStorage() throws {
        let model = try Model(entities: Self.classes)
        let node = try #require(model.entity(for: HNode.self))
        let clip = try #require(model.entity(for: HClip.self))
        let long = try #require(model.entity(for: HLongPage.self))
        for entity in [clip, long] {
            #expect(entity.relationship(named: "owner")?.columnName == node.relationship(named: "owner")?.columnName)
            #expect(entity.relationship(named: "labels")?.joinTable == node.relationship(named: "labels")?.joinTable)
            #expect(entity.relationship(named: "cover")?.columnName == "cover_id")
            #expect(entity.relationship(named: "cover")?.isOneToOne == true)
            #expect(entity.relationship(named: "owner")?.destinationRootName == "HOwner")
        }
        #expect(model.joinTables.count == 1)
        #expect(node.relationship(named: "labels")?.joinTable?.sourceColumn == "h_node_id")
        #expect(model.entity(for: HChannel.self)?.relationship(named: "clips")?.destinationEntityName == "HClip")
        #expect(model.entity(for: HLabel.self)?.relationship(named: "nodes")?.destinationRootName == "HNode")
    }

    @Test func oneTableHoldsTheHierarchy() throws {
        let script = try Model(entities: Self.classes).schemaSQL()
        #expect(script.contains("CREATE TABLE nodes ("))
        #expect(!script.contains("CREATE TABLE h_page") && !script.contains("CREATE TABLE h_clip"))
        #expect(script.contains("entity text NOT NULL CHECK (entity IN ('HPage', 'HLongPage', 'HClip')),"))
        #expect(script.contains("body text,") && script.contains("chapters bigint,"))
        // (A sub-entity's key to a table created later is added by ALTER TABLE.)
        #expect(script.contains("ADD CONSTRAINT nodes_channel_id_fkey FOREIGN KEY (channel_id) REFERENCES h_channel (id)"))
        #expect(script.contains("cover_id bigint") && script.contains("CONSTRAINT nodes_cover_id_key UNIQUE (cover_id)"))
        #expect(script.components(separatedBy: "cover_id bigint").count == 2)  // one column, though three entities inherit it
    }

    @Test func siblingsMayNotMapAColumnToTwoTypesNorUseTheDiscriminator() {
        #expect {
            try Model(entities: [HBase.self, HLeft.self, HRight.self])
        } throws: { error in
            (error as? ModelError)?.problems == [.duplicateColumn(entity: "HRight", column: "size")]
        }
        #expect {
            try Model(entities: [HBase.self, HKind.self])
        } throws: { error in
            (error as? ModelError)?.problems.map(\.code).contains(.reservedColumn) == true
        }
    }

    @Test func aSubclassWithoutItsSuperclassInTheModelIsAnEntityOfItsOwn() throws {
        let model = try Model(entities: [HLeft.self])
        let left = try #require(model.entity(for: HLeft.self))
        #expect(left.superentityName == nil && left.discriminatorColumn == nil && !left.isAbstract)
        #expect(left.tableName == "h_left" && left.attributes.map(\.name) == ["name", "size"])
    }

    @Test func objectsOutsideAContextKnowTheirKind() {
        let clip = HClip()
        #expect(clip.entity.isKind(of: HNode.self) && clip.entity.isKind(of: HClip.self))
        #expect(!clip.entity.isKind(of: HPage.self))
    }
}

@Suite("Entity inheritance: the model's hierarchy API")
struct InheritanceModelAPITests {
    @Test func superentitiesSubentitiesAndKinds() throws {
        let model = try Model(entities: InheritanceModelTests.classes)
        let node = try #require(model.entity(for: HNode.self))
        let page = try #require(model.entity(for: HPage.self))
        let long = try #require(model.entity(for: HLongPage.self))
        let clip = try #require(model.entity(for: HClip.self))
        let owner = try #require(model.entity(for: HOwner.self))
        #expect(model.superentity(of: long) === page && model.superentity(of: page) === node)
        #expect(model.superentity(of: node) == nil && model.superentity(of: owner) == nil)
        #expect(model.subentities(of: node).map(\.name) == ["HPage", "HClip"] && model.subentities(of: clip).isEmpty)
        #expect(model.entity(long, isKindOf: node) && model.entity(long, isKindOf: page) && model.entity(node, isKindOf: node))
        #expect(!model.entity(clip, isKindOf: page) && !model.entity(node, isKindOf: page) && !model.entity(owner, isKindOf: node))
        // An entity of another model is nobody's kind here.
        let other = try #require(try Model(entities: InheritanceModelTests.classes).entity(for: HNode.self))
        #expect(!model.entity(long, isKindOf: other))
    }
}
