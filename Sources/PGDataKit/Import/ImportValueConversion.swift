import Foundation

/// How record values become attribute values, and back on export.
struct ValueConversion {
    /// How dates are read and written.
    var dateFormat: DateFormat = .iso8601
    /// Whether numeric attributes accept numbers written as strings (`"42"`, `"-3.5"`;
    /// POSIX notation).
    var parsesNumbersFromStrings = false
    /// Key matching: whole numbers and their decimal text are the same key (`123` for a
    /// string key, `"123"` for an integer key).
    var convertsKeys = false

    /// Key matching rules.
    static let key = ValueConversion(parsesNumbersFromStrings: true, convertsKeys: true)

    /// Why a value could not be converted: what the attribute expects and what the record
    /// holds (its kind, never its text).
    struct Failure: Error {
        let expected: String
        let actual: String
    }

    /// The stored value for `attribute` (`nil` inside for `NULL`).
    ///
    /// - Throws: `Failure` when the value does not fit, including `null` for a
    ///   non-optional attribute.
    func storedValue(
        _ value: JSONValue, for attribute: AttributeDescription, formatters: DateFormatters
    ) throws(Failure) -> StoredValue {
        // The common cases without going through `Any` and `coerce` (every mapped value
        // of every record comes here); not for enums, whose raw values `coerce` checks.
        switch (attribute.storedValueProblem == nil ? attribute.decoding : .generic, value) {
        case (.string, .string(let text)): return .string(text)
        case (.int, .number(let number)): if let whole = Int(exactly: number) { return .int(whole) }
        case (.int64, .number(let number)): if let whole = Int64(exactly: number) { return .int64(whole) }
        default: break
        }
        let converted: Any?
        if case .null = value {
            converted = nil
        } else {
            converted = try scalar(value, for: attribute, formatters: formatters)
        }
        guard let stored = attribute.coerce(converted) else {
            let actual: String
            if converted == nil {
                actual = "null"
            } else if attribute.storedValueProblem != nil {
                // (An enum's unknown raw value, JSON that does not decode into the type.)
                actual = attribute.type == .json ? "JSON that does not decode into it" : "a value no case has as raw value"
            } else {
                actual = "out of range"
            }
            throw Failure(expected: expectedDescription(attribute), actual: actual)
        }
        return stored
    }

    /// What the attribute expects, for messages (`Int?`, `Date (ISO 8601)`).
    func expectedDescription(_ attribute: AttributeDescription) -> String {
        if attribute.storedValueProblem != nil {
            // An enum or a `Codable` type: what its record value is.
            return attribute.swiftTypeName
                + (attribute.type == .json ? " (JSON that decodes into it)" : " (the raw value of one of its cases)")
        }
        switch attribute.type {
        case .date: return attribute.swiftTypeName + " (\(dateDescription(plural: false)))"
        case .binary: return attribute.swiftTypeName + " (a base64 string)"
        case .uuid: return attribute.swiftTypeName + " (a UUID string)"
        case .dateArray: return attribute.swiftTypeName + " (an array of \(dateDescription(plural: true)))"
        case .uuidArray: return attribute.swiftTypeName + " (an array of UUID strings)"
        default: return attribute.type.isArray ? attribute.swiftTypeName + " (an array)" : attribute.swiftTypeName
        }
    }

    /// How dates are written in records: `an ISO 8601 string` (`ISO 8601 strings`).
    private func dateDescription(plural: Bool) -> String {
        switch dateFormat {
        case .iso8601: return plural ? "ISO 8601 strings" : "an ISO 8601 string"
        case .custom(let pattern, _): return plural ? "strings of format \(pattern)" : "a string of format \(pattern)"
        case .secondsSince1970: return "seconds since 1970"
        case .millisecondsSince1970: return "milliseconds since 1970"
        }
    }

    /// The Swift value for a non-null record value, before `coerce` picks the exact type.
    private func scalar(_ value: JSONValue, for attribute: AttributeDescription, formatters: DateFormatters) throws(Failure)
        -> Any
    {
        guard let elementType = attribute.type.elementType else {
            return try scalar(value, type: attribute.type, for: attribute, formatters: formatters)
        }
        // An array: a JSON array, each element converted as an attribute of the element
        // type would be (`null` is no element); a failure names the element's index.
        guard case .array(let items) = value else {
            throw Failure(expected: expectedDescription(attribute), actual: value.kindName)
        }
        var elements: [Any] = []
        elements.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            do throws(Failure) {
                if case .null = item { throw Failure(expected: "", actual: "null") }
                elements.append(try scalar(item, type: elementType, for: attribute, formatters: formatters))
            } catch {
                throw Failure(expected: expectedDescription(attribute), actual: "element [\(index)] is \(error.actual)")
            }
        }
        return elements
    }

    /// `scalar(_:for:formatters:)` for a value of a scalar `type` (the attribute's, or its
    /// element type); integers of a width other than 64 bits are checked to fit.
    private func scalar(
        _ value: JSONValue, type: AttributeType, for attribute: AttributeDescription, formatters: DateFormatters
    ) throws(Failure) -> Any {
        var fail: Failure { Failure(expected: expectedDescription(attribute), actual: value.kindName) }
        switch type {
        case .string:
            if case .string(let text) = value { return text }
            if convertsKeys, case .number(let number) = value, let whole = Int64(exactly: number) { return String(whole) }
            throw fail
        case .int16, .int32, .int64:
            switch value {
            case .number(let number):
                guard let whole = Int64(exactly: number) else {
                    throw Failure(expected: expectedDescription(attribute), actual: "a number that is not a whole number or too large")
                }
                return try fitting(whole, type, attribute)
            case .string(let text) where parsesNumbersFromStrings || convertsKeys:
                guard let whole = Int64(text.trimmingCharacters(in: .whitespaces)) else {
                    throw Failure(expected: expectedDescription(attribute), actual: "a string that is not a whole number")
                }
                return try fitting(whole, type, attribute)
            default: throw fail
            }
        case .double, .float:
            let number: Double
            switch value {
            case .number(let value): number = value
            case .string(let text) where parsesNumbersFromStrings:
                guard let parsed = Double(text.trimmingCharacters(in: .whitespaces)) else {
                    throw Failure(expected: expectedDescription(attribute), actual: "a string that is not a number")
                }
                number = parsed
            default: throw fail
            }
            return type == .float ? Float(number) as Any : number as Any
        case .decimal:
            switch value {
            case .number(let number):
                guard number.isFinite else { throw fail }
                return Decimal(number)
            case .string(let text) where parsesNumbersFromStrings:
                guard let parsed = Decimal(string: text.trimmingCharacters(in: .whitespaces), locale: Locale(identifier: "en_US_POSIX"))
                else {
                    throw Failure(expected: expectedDescription(attribute), actual: "a string that is not a number")
                }
                return parsed
            default: throw fail
            }
        case .bool:
            if case .bool(let flag) = value { return flag }
            throw fail
        case .date:
            guard let date = formatters.date(from: value, format: dateFormat) else {
                if case .string = value {
                    throw Failure(expected: expectedDescription(attribute), actual: "a string in another format")
                }
                throw fail
            }
            return date
        case .uuid:
            guard case .string(let text) = value, let uuid = UUID(uuidString: text) else { throw fail }
            return uuid
        case .binary:
            guard case .string(let text) = value, let data = Data(base64Encoded: text) else { throw fail }
            return data
        case .json:
            guard !value.nestsTooDeep else {
                throw Failure(
                    expected: expectedDescription(attribute) + " nested at most \(JSONValue.maximumDepth) levels",
                    actual: "JSON nested deeper")
            }
            return value
        case .stringArray, .int16Array, .int32Array, .int64Array, .doubleArray, .floatArray, .decimalArray, .boolArray,
            .dateArray, .uuidArray:
            throw fail  // (no arrays of arrays: `scalar(_:for:formatters:)` takes the elements)
        }
    }

    /// An integer of an array's elements, checked to fit their width (a scalar
    /// attribute's is checked by `coerce`, which cannot say which element failed).
    private func fitting(_ whole: Int64, _ type: AttributeType, _ attribute: AttributeDescription) throws(Failure) -> Int64 {
        guard attribute.type.isArray else { return whole }
        let fits = switch type {
        case .int16: Int16(exactly: whole) != nil
        case .int32: Int32(exactly: whole) != nil
        default: true
        }
        guard fits else { throw Failure(expected: expectedDescription(attribute), actual: "out of range") }
        return whole
    }

    /// The record value of a stored attribute value, for export.
    func recordValue(_ stored: StoredValue, formatters: DateFormatters) -> JSONValue {
        switch stored {
        case .null: return .null
        case .string(let value): return .string(value)
        case .int(let value): return .number(Double(value))
        case .int64(let value): return .number(Double(value))
        case .int32(let value): return .number(Double(value))
        case .int16(let value): return .number(Double(value))
        case .double(let value): return .number(value)
        case .float(let value): return .number(Double(value))
        case .bool(let value): return .bool(value)
        case .date(let value): return formatters.value(of: value, format: dateFormat)
        case .uuid(let value): return .string(value.uuidString.lowercased())
        case .data(let value): return .string(value.base64EncodedString())
        case .json(let value): return value
        case .other(let box):
            if let value = box.value as? Decimal { return .number(NSDecimalNumber(decimal: value).doubleValue) }
            if let array = box.value as? any StoredArray {
                return .array(array.storedElements.map { recordValue($0, formatters: formatters) })
            }
            return .string("\(box.value)")
        }
    }
}
