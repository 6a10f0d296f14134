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
        case .date:
            switch dateFormat {
            case .iso8601: return attribute.swiftTypeName + " (an ISO 8601 string)"
            case .custom(let pattern, _): return attribute.swiftTypeName + " (a string of format \(pattern))"
            case .secondsSince1970: return attribute.swiftTypeName + " (seconds since 1970)"
            case .millisecondsSince1970: return attribute.swiftTypeName + " (milliseconds since 1970)"
            }
        case .binary: return attribute.swiftTypeName + " (a base64 string)"
        case .uuid: return attribute.swiftTypeName + " (a UUID string)"
        default: return attribute.swiftTypeName
        }
    }

    /// The Swift value for a non-null record value, before `coerce` picks the exact type.
    private func scalar(_ value: JSONValue, for attribute: AttributeDescription, formatters: DateFormatters) throws(Failure)
        -> Any
    {
        var fail: Failure { Failure(expected: expectedDescription(attribute), actual: value.kindName) }
        switch attribute.type {
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
                return whole
            case .string(let text) where parsesNumbersFromStrings || convertsKeys:
                guard let whole = Int64(text.trimmingCharacters(in: .whitespaces)) else {
                    throw Failure(expected: expectedDescription(attribute), actual: "a string that is not a whole number")
                }
                return whole
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
            return attribute.type == .float ? Float(number) as Any : number as Any
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
        }
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
            return .string("\(box.value)")
        }
    }
}
