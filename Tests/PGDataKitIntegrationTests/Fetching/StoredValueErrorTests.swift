import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Values another program wrote that the model cannot hold fail only the fetches that
/// read them, with an error naming the entity, the row and the attribute.
@Suite("Stored values the model cannot hold")
struct StoredValueErrorTests {
    @Test func aNumericBeyondDecimalNamesItsRowAndSparesOtherFetches() throws {
        try ExampleSchema.withManager { manager in
            let seed = manager.newPrivateContext()
            try seed.performAndWait { () throws in
                for text in ["fine", "huge"] {
                    let sample = Sample(context: seed)
                    sample.text = text
                    sample.decimal = 1
                }
                try seed.save()
            }
            let digits = String(repeating: "9", count: 50)
            let hugeKey = try ExampleSchema.count("SELECT id FROM samples WHERE text = 'huge'", in: manager)
            try manager.coordinator.pool.withConnection { connection in
                _ = try connection.execute("UPDATE samples SET decimal = '\(digits)'::numeric WHERE text = 'huge'")
            }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let fine = try Sample.fetch(in: context, where: "text == 'fine'")
                #expect(fine.count == 1)
                do {
                    _ = try context.fetchAll(Sample.self)
                    Issue.record("the fetch read a value Decimal cannot hold")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue, "\(error)")
                    #expect(error.entity == "Sample" && error.key == "decimal" && error.primaryKey == Int64(hugeKey))
                    #expect(!"\(error)".contains(digits))
                }
                // The objects registered before the failed fetch are still the context's
                // (a fetch registers into the registry moved aside while it runs).
                #expect(context.registeredObjects == Set(fine))
                #expect(try Sample.fetch(in: context, where: "text == 'fine'").first === fine.first)
            }
            // The same in a fresh context: the failed fetch registers no object of the
            // row it failed on, and the context fetches on.
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait { () throws in
                #expect(throws: ManagedObjectError.self) { _ = try fresh.fetchAll(Sample.self) }
                #expect(!fresh.registeredObjects.contains { ($0 as? Sample)?.text == "huge" })
                let fine = try Sample.fetch(in: fresh, where: "text == 'fine'")
                #expect(fine.count == 1 && fresh.registeredObjects.isSuperset(of: fine))
                #expect(try Sample.fetch(in: fresh, where: "text == 'fine'").first === fine.first)
            }
        }
    }
}
