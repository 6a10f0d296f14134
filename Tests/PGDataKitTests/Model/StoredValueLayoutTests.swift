import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A model object with one attribute of each scalar type the fast paths read.
private final class Sample: ManagedObject {
    @Attribute var text: String?
    @Attribute var integer: Int?
    @Attribute var wide: Int64?
    @Attribute var narrow: Int32?
    @Attribute var short: Int16?
    @Attribute var flag: Bool?
    @Attribute var real: Double?
    @Attribute var day: Date?
}

@Suite("Stored values read in place: the same answers as the generic path")
struct StoredValueLayoutTests {
    @Test func theLayoutCheckPassesHere() {
        // When it fails, every read silently takes the slow path: a speed regression the
        // upsert benchmark would show, caught here first.
        #expect(StoredValueLayout.isReadable)
    }

    @Test(arguments: [
        ("short" as String) as StoredValue, "a string well past fifteen bytes, stored on the heap", "", "ünïcödé",
        42 as Int, Int.min, Int64.max, Int32(-3), Int16(7), true, false, 2.5, Double.nan, nil, Date(timeIntervalSince1970: 5),
    ])
    func readsMatchTheGenericPath(_ value: StoredValue) {
        let stored = [value]
        stored.withUnsafeBufferPointer { buffer in
            guard let pointer = buffer.baseAddress else { return }
            #expect(unboxStored(at: pointer, as: String.self) == (value as? String))
            #expect(unboxStored(at: pointer, as: Int.self) == (value as? Int))
            #expect(unboxStored(at: pointer, as: Int64.self) == (value as? Int64))
            #expect(unboxStored(at: pointer, as: Bool.self) == (value as? Bool))
            #expect(unboxStored(at: pointer, as: Date.self) == (value as? Date))
            #expect(unboxStored(value, as: String.self) == (value as? String))
            #expect(unboxStored(value, as: Int.self) == (value as? Int))
            #expect(StoredValueLayout.isNull(at: pointer) == (value == nil))
        }
    }

    @Test func inPlaceEqualityMatchesTheClosures() {
        let entity = EntityDescription(objectClass: Sample.self)
        let samples: [[StoredValue]] = [
            ["a", "b", "a", nil, "a string well past fifteen bytes, stored on the heap"],
            [1, 2, 1, nil, Int.max], [Int64(1), Int64(2), Int64(1), nil, Int64.min], [Int32(1), Int32(2), Int32(1), nil],
            [Int16(1), Int16(2), Int16(1), nil], [true, false, true, nil], [1.5, 2.5, 1.5, nil, Double.infinity],
            [Date(timeIntervalSince1970: 1), Date(timeIntervalSince1970: 2), Date(timeIntervalSince1970: 1), nil],
        ]
        for (attribute, values) in zip(entity.attributes, samples) {
            values.withUnsafeBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return }
                for left in values.indices {
                    for right in values.indices {
                        #expect(
                            attribute.isEqual(at: base + left, base + right) == attribute.isEqual(values[left], values[right]),
                            "\(attribute.name): \(String(describing: values[left])) vs \(String(describing: values[right]))")
                    }
                }
            }
        }
    }
}
