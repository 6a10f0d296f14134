/// An enum an attribute stores by its raw value: a `String` raw value in a `text` column,
/// an `Int` one in `bigint` (`Int32` in `integer`, `Int16` in `smallint`), and so on for
/// every ``AttributeScalar`` type.
///
/// For example:
///
/// ```swift
/// enum Status: String, AttributeEnum { case draft, published }
/// enum Priority: Int, AttributeEnum { case low = 1, high = 2 }
///
/// final class Ticket: ManagedObject {
///     @Attribute var status: Status = .draft   // status text NOT NULL DEFAULT 'draft'
///     @Attribute var priority: Priority?       // priority bigint
/// }
/// ```
///
/// The conformance is all there is to write: the requirements of ``AttributeStorable``
/// come with it, and Swift makes an enum of `String`, integer or floating-point raw
/// values `Codable` by its raw value (which `#Predicate` needs of the values it
/// compares). The attribute's ``AttributeDescription/type`` is its raw value's
/// (`.string`, `.int64`, …), so the schema, saves, merges and change records see the raw
/// value. Dynamic access gives the raw value too (`value(forKey:)`, dictionaries,
/// export) and takes either (`setValue(Status.draft, forKey:)` or `setValue("draft",
/// forKey:)`, an import record's `"draft"`); predicates compare raw values (`"status ==
/// %@", Status.published`). A row holding a raw value no case has (written by other SQL,
/// or by a program that knows more cases) fails the fetch that reads it with
/// `ManagedObjectError.invalidStoredValue`, naming the entity, the attribute and the row.
public protocol AttributeEnum: RawRepresentable, Codable, AttributeStorable, AttributeValue
where RawValue: AttributeScalar, Scalar == RawValue {}

extension AttributeEnum {
    /// The case of a raw value.
    ///
    /// - Parameter storedScalar: the raw value.
    /// - Throws: `PostgresValueError` (`.outOfRange`) when no case has the raw value.
    @inlinable
    public init(storedScalar: RawValue) throws {
        guard let value = Self(rawValue: storedScalar) else {
            throw PostgresValueError(
                code: .outOfRange, swiftType: String(describing: Self.self),
                reason: "no case of \(Self.self) has this raw value")
        }
        self = value
    }

    /// The raw value.
    @inlinable
    public func storedScalar() -> RawValue { rawValue }

    /// Not optional.
    public static var isOptional: Bool { false }

    /// The case of a raw value; `nil` for `NULL` and for a raw value no case has.
    @inlinable
    public static func fromScalar(_ scalar: RawValue?) -> Self? { scalar.flatMap(Self.init(rawValue:)) }

    /// The raw value.
    @inlinable
    public var scalar: RawValue? { rawValue }
}
