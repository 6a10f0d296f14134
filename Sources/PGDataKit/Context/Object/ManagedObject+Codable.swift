import Foundation
import Logging

extension ManagedObject {
    /// `setStoredValue(_:at:)` for an `AttributeCodable` property (or an optional one):
    /// the value's JSON, `NULL` for `nil`. A value that does not encode is not kept: the
    /// error is logged and a stand-in is stored that the save refuses (as for a
    /// `JSONValue` nested too deep), so the object's save throws until the property is
    /// set again; reading the property meanwhile gives its default.
    @usableFromInline
    func setStoredCodable<Value: AttributeValue>(_ value: Value, at slot: Int) {
        let json: JSONValue?
        do {
            if let codable = value as? any AttributeCodable {
                json = try codable.storedScalar()
            } else {
                json = value.scalar as? JSONValue  // `nil` of an optional
            }
        } catch {
            let reason = (error as? PostgresValueError)?.reason ?? "\(type(of: error))"
            (contextReference?.logger ?? Logger(label: "pgdatakit")).error(
                "\(entity.name).\(entity.attributes[slot].name) set to a value that does not encode as JSON (\(reason)): not kept; saving the object throws until the attribute is set again")
            setStoredValue(.json(JSONValue.tooDeepStandIn), at: slot)
            return
        }
        // (Made by the encoder and checked for depth: released like any value.)
        setStoredValue(json.map { .json($0) } ?? .null, at: slot)
    }
}

extension EntityDescription {
    /// Checks the values of a stored row (in attribute order) against the attributes whose
    /// Swift type holds fewer values than their column: a raw value no case of an enum
    /// has, JSON that does not decode into a `Codable` type.
    ///
    /// - Parameter primaryKey: the row's key, for the error.
    /// - Throws: `ManagedObjectError.invalidStoredValue` naming the entity, the attribute
    ///   and the row (not the value).
    func checkStoredValues<Values: RandomAccessCollection<StoredValue>>(
        _ values: Values, primaryKey: Int64
    ) throws where Values.Index == Int {
        for index in checkedAttributeIndexes where index < values.count {
            let attribute = attributes[index]
            if let reason = attribute.storedValueProblem?(values[index]) {
                throw ManagedObjectError.invalidStoredValue(
                    entity: name, key: attribute.name, primaryKey: primaryKey, reason: reason)
            }
        }
    }
}
