import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// An enum of `String` raw values, stored as `text`.
enum UnitStatus: String, AttributeEnum { case draft, published }
/// An enum of `Int` raw values, stored as `bigint`.
enum UnitPriority: Int, AttributeEnum { case low = 1, high = 2 }
/// Enums of the narrower integers: `smallint` and `integer`.
enum UnitSize: Int16, AttributeEnum { case small = 1, large = 2 }
enum UnitLevel: Int32, AttributeEnum { case one = 1, two = 2 }
/// A `Codable` value, stored as `jsonb`.
struct UnitAddress: Codable, Equatable, AttributeCodable {
    var city: String
    var zip: String
}

/// A `Codable` value whose encoding always fails.
struct UnitUnencodable: Codable, Equatable, AttributeCodable {
    struct Refused: Error {}
    var text = ""
    init() {}
    init(from decoder: any Decoder) throws { text = try decoder.singleValueContainer().decode(String.self) }
    func encode(to encoder: any Encoder) throws { throw Refused() }
}

private final class UnitPost: ManagedObject {
    override class var tableName: String { "unit_posts" }
    @Attribute var status: UnitStatus = .draft
    @Attribute var priority: UnitPriority?
    @Attribute var size: UnitSize = .small
    @Attribute var level: UnitLevel?
    @Attribute var address: UnitAddress?
    @Attribute var home: UnitAddress = UnitAddress(city: "", zip: "")
    @Attribute var broken: UnitUnencodable?
}

/// Enum and `Codable` attributes in the model and its DDL, and their conversions, without
/// a server.
@Suite("Enum and Codable attributes, without a server")
struct EnumAndCodableAttributeTests {
    private func attribute(_ name: String) throws -> AttributeDescription {
        let model = try Model(entities: [UnitPost.self])
        return try #require(model.entity(for: UnitPost.self)?.attribute(named: name))
    }

    /// The model describes each attribute by its stored type, optionality and default.
    @Test(arguments: [
        ("status", AttributeType.string, false, StoredValue.string("draft"), "UnitStatus"),
        ("priority", .int64, true, .null, "UnitPriority?"),
        ("size", .int16, false, .int16(1), "UnitSize"),
        ("level", .int32, true, .null, "UnitLevel?"),
        ("address", .json, true, .null, "UnitAddress?"),
        ("home", .json, false, .json(["city": "", "zip": ""]), "UnitAddress"),
    ])
    func theModelDescribesTheStoredType(
        name: String, type: AttributeType, optional: Bool, defaultValue: StoredValue, swiftType: String
    ) throws {
        let attribute = try attribute(name)
        #expect(attribute.type == type)
        #expect(attribute.isOptional == optional)
        #expect(attribute.defaultValue == defaultValue)
        #expect(attribute.swiftTypeName == swiftType)
        #expect(attribute.storedValueProblem != nil)
    }

    /// Scalars are not checked on fetch: their type holds every value of the column.
    @Test func onlyNarrowAttributesAreChecked() throws {
        final class Plain: ManagedObject {
            @Attribute var text: String = ""
            @Attribute var number: Int?
            @Attribute var json: JSONValue = .null
            @Attribute var status: UnitStatus?
        }
        let entity = try #require(try Model(entities: [Plain.self]).entity(for: Plain.self))
        #expect(entity.checkedAttributeIndexes == [3])
    }

    /// The DDL: raw values' column types, defaults as the raw value and as the JSON.
    @Test(arguments: [
        "status text NOT NULL DEFAULT 'draft'",
        "priority bigint",
        "size smallint NOT NULL DEFAULT 1",
        "level integer",
        "address jsonb",
        "home jsonb NOT NULL DEFAULT '{\"city\":\"\",\"zip\":\"\"}'::jsonb",
    ])
    func schemaSQLWritesRawValuesAndJSON(line: String) throws {
        let script = try Model(entities: [UnitPost.self]).schemaSQL()
        #expect(script.contains("\n    \(line),\n"), "no line \(line) in\n\(script)")
    }

    /// A stored value the type cannot hold is named, with a reason that shows no value.
    @Test func storedValuesTheTypeCannotHoldAreProblems() throws {
        let status = try attribute("status")
        #expect(status.storedValueProblem?(.string("published")) == nil)
        #expect(status.storedValueProblem?(.null) == nil)
        let unknown = try #require(status.storedValueProblem?(.string("secret-archived")))
        #expect(unknown.contains("UnitStatus") && !unknown.contains("secret-archived"))
        let priority = try attribute("priority")
        #expect(priority.storedValueProblem?(.int(2)) == nil)
        #expect(priority.storedValueProblem?(.int(3)) != nil)
        let home = try attribute("home")
        #expect(home.storedValueProblem?(.json(["city": "Oslo", "zip": "0150"])) == nil)
        let missing = try #require(home.storedValueProblem?(.json(["city": "Oslo"])))
        #expect(missing.contains("zip"), "\(missing)")
        let wrongType = try #require(home.storedValueProblem?(.json(["city": 12, "zip": "secret-zip"])))
        #expect(wrongType.contains("city") && !wrongType.contains("secret-zip"), "\(wrongType)")
        #expect(home.storedValueProblem?(.json("a string")) != nil)
    }

    /// The dynamic path takes the enum and its raw value, a Codable value and JSON that
    /// decodes into it; nothing the type cannot hold.
    @Test func coercionTakesTheTypeAndItsStoredForms() throws {
        let status = try attribute("status")
        #expect(status.coerce(UnitStatus.published) == .string("published"))
        #expect(status.coerce("published") == .string("published"))
        #expect(status.coerce("archived") == nil)
        #expect(status.coerce(nil) == nil)
        #expect(status.coerce(Optional<UnitStatus>.none as Any) == nil)
        #expect(status.coerce(7) == nil)
        let priority = try attribute("priority")
        #expect(priority.coerce(UnitPriority.high) == .int(2))
        #expect(priority.coerce(Optional(UnitPriority.low) as Any) == .int(1))
        #expect(priority.coerce(Optional<UnitPriority>.none as Any) == .null)
        #expect(priority.coerce(Int64(2)) == .int(2))
        #expect(priority.coerce(3) == nil)
        #expect(priority.coerce(nil) == .null)
        let size = try attribute("size")
        #expect(size.coerce(2) == .int16(2))
        #expect(size.coerce(UnitSize.large) == .int16(2))
        let home = try attribute("home")
        let oslo: JSONValue = ["city": "Oslo", "zip": "0150"]
        #expect(home.coerce(UnitAddress(city: "Oslo", zip: "0150")) == .json(oslo))
        #expect(home.coerce(oslo) == .json(oslo))
        #expect(home.coerce(["city": "Oslo", "zip": "0150"] as [String: Any]) == .json(oslo))
        #expect(home.coerce(["city": "Oslo"] as JSONValue) == nil)
        #expect(home.coerce(["city": "Oslo"] as [String: Any]) == nil)
        #expect(home.coerce("Oslo") == nil)
        #expect(home.coerce(nil) == nil)
        #expect(try attribute("address").coerce(nil) == .null)
        #expect(try attribute("broken").coerce(UnitUnencodable()) == nil)
    }

    /// The conversions themselves: raw values, JSON, and non-finite numbers as strings.
    @Test func conversionsRoundTrip() throws {
        #expect(try UnitStatus(storedScalar: "draft") == .draft)
        #expect(throws: PostgresValueError.self) { try UnitStatus(storedScalar: "archived") }
        #expect(UnitPriority.high.storedScalar() == 2)
        struct Reading: Codable, Equatable, AttributeCodable {
            var value: Double
            var when: Date
        }
        for value in [1.5, .nan, .infinity, -.infinity] {
            let reading = Reading(value: value, when: Date(timeIntervalSinceReferenceDate: 12.25))
            let json = try reading.storedScalar()
            let back = try Reading(storedScalar: json)
            #expect(back.value.isNaN ? value.isNaN : back == reading)
        }
        do {
            _ = try UnitUnencodable().storedScalar()
            Issue.record("the value encoded")
        } catch let error as PostgresValueError {
            #expect(error.code == .unencodable && error.swiftType == "UnitUnencodable", "\(error)")
        }
    }

    /// Optionals of the new types: `NULL`, a value, a stored scalar the type cannot hold.
    @Test func optionalsConvertThroughTheWrappedType() {
        #expect(UnitPriority?.isOptional && !UnitPriority.isOptional)
        #expect(UnitPriority?.fromScalar(nil) == .some(nil))
        #expect(UnitPriority?.fromScalar(2) == .some(.high))
        #expect(UnitPriority?.fromScalar(5) == nil)
        #expect(UnitPriority?.some(.low).scalar == 1)
        #expect(UnitAddress?.none.scalar == nil)
        #expect(UnitAddress?.fromScalar(["city": "A", "zip": "1"]) == .some(UnitAddress(city: "A", zip: "1")))
        #expect(String?.fromScalar("x") == .some("x"))
    }

    /// A value that does not encode is not kept: the read gives the default, and the
    /// stored stand-in is one the save refuses.
    @Test func aValueThatDoesNotEncodeIsNotKept() throws {
        let post = UnitPost()
        post.broken = UnitUnencodable()
        #expect(post.broken == nil)
        post.home.city = "Oslo"
        #expect(post.home == UnitAddress(city: "Oslo", zip: ""))
    }
}
