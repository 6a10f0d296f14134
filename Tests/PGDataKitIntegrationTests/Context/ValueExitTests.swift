import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Inside an object, values are `StoredValue`s; every way they leave the library must hand
/// out the Swift value itself (a `StoredValue` passed on as `Any` would compile, and
/// every `as? String` of the caller would then fail).
@Suite("Values leave the library as their Swift types")
struct ValueExitTests {
    @Test func everyWayOutHandsOutTheScalarItself() throws {
        try ExampleSchema.withManager { manager in
            let writer = manager.newPrivateContext()
            let id = try writer.performAndWait { () throws -> ObjectID in
                let sample = Sample(context: writer)
                sample.text = "text"
                sample.optionalText = "optional"
                sample.decimal = Decimal(string: "1.25") ?? 0
                sample.json = ["a": [1, "two"]]
                sample.optionalInt = 3
                sample.optionalDouble = 0.5
                sample.optionalDecimal = 2
                sample.optionalFlag = true
                sample.optionalDate = Date(timeIntervalSince1970: 7)
                sample.optionalUUID = UUID()
                sample.optionalData = Data([1])
                sample.optionalJSON = .string("j")
                try writer.save()
                return sample.objectID
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let sample = try #require(try context.existingObject(with: id) as? Sample)
                let expectedTypes = Dictionary(
                    uniqueKeysWithValues: sample.entity.attributes.map {
                        ($0.name, $0.swiftTypeName.hasSuffix("?") ? String($0.swiftTypeName.dropLast()) : $0.swiftTypeName)
                    })
                var checked: [String: Int] = [:]
                func check(_ value: Any?, _ name: String, _ way: String) {
                    checked[way, default: 0] += 1
                    guard let value else {
                        Issue.record("\(way) gave nil for \(name), which holds a value")
                        return
                    }
                    #expect(!(value is StoredValue), "\(way): \(name)")
                    #expect(String(describing: type(of: value)) == expectedTypes[name], "\(way): \(name) is \(type(of: value))")
                }
                for name in expectedTypes.keys { check(try sample.value(forKey: name), name, "value(forKey:)") }
                for (name, value) in sample.committedValues(forKeys: nil) { check(value ?? nil, name, "committedValues") }
                var request = FetchRequest<Sample>()
                request.predicate = try FetchPredicate(format: "optionalText == %@", "optional")
                for row in try context.fetchDictionaries(request) {
                    for (name, value) in row { check(value ?? nil, name, "fetchDictionaries") }
                }
                sample.text = "changed"
                sample.optionalText = "changed"
                sample.decimal = 9
                sample.optionalJSON = .number(1)
                for (name, value) in sample.changedValues() { check(value ?? nil, name, "changedValues") }
                #expect(sample.changedValues().count == 4)
                // In memory too: a predicate over the pending change, sorted by an attribute.
                request.predicate = try FetchPredicate(format: "optionalText == %@ AND decimal > 1", "changed")
                request.sortDescriptors = [FetchSortDescriptor("decimal")]
                #expect(try context.fetch(request).map(\.objectID) == [id])
                let count = expectedTypes.count
                #expect(checked == ["value(forKey:)": count, "committedValues": count, "fetchDictionaries": count, "changedValues": 4])
            }
        }
    }
}
