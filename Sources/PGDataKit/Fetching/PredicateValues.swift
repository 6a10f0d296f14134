import Foundation

/// Conversions of predicate constants to the types they are compared with, shared by
/// SQL and memory: both engines compare the same converted value.
enum PredicateValues {
    /// The value as the type's Swift scalar, or `nil` when the two cannot be compared.
    ///
    /// Numbers compare by value whatever their types, as in `NSPredicate`: an integer
    /// attribute compared with `40.5` gets a `Double` (compared as `double precision`,
    /// as PostgreSQL compares `integer` with `double precision`), with a `Decimal` gets
    /// a `Decimal` (compared as `numeric`), and integers stay `Int` whatever the column's
    /// width, so `int16 < 100000` is simply true.
    static func convert(_ value: FetchPredicate.Value, to type: AttributeType) -> (any PostgresEncodable & Sendable)? {
        switch (value, type) {
        case (.string(let text), .string): return text
        case (.integer(let number), .int64), (.integer(let number), .int32), (.integer(let number), .int16):
            return Int(number)
        case (.integer(let number), .double): return Double(number)
        case (.integer(let number), .float): return Float(number)
        case (.integer(let number), .decimal): return Decimal(number)
        case (.double(let number), .double): return number
        case (.double(let number), .float): return Float(number)
        case (.double(let number), .decimal): return Decimal(string: "\(number)")
        case (.double(let number), .int64), (.double(let number), .int32), (.double(let number), .int16):
            if number.rounded() == number, let integer = Int(exactly: number) { return integer }
            return number
        case (.decimal(let number), .decimal): return number
        case (.decimal(let number), .double): return NSDecimalNumber(decimal: number).doubleValue
        case (.decimal(let number), .float): return Float(NSDecimalNumber(decimal: number).doubleValue)
        case (.decimal(let number), .int64), (.decimal(let number), .int32), (.decimal(let number), .int16):
            return number
        case (.bool(let flag), .bool): return flag
        case (.integer(let number), .bool) where number == 0 || number == 1: return number == 1
        case (.date(let date), .date): return date
        case (.uuid(let uuid), .uuid): return uuid
        case (.string(let text), .uuid): return UUID(uuidString: text)
        case (.data(let data), .binary): return data
        default: return nil
        }
    }

    /// A list of constants as a value of an array attribute type (`tags == %@` with an
    /// array argument): each item converted to the element type as `convert` does, an
    /// array of the type's Swift elements (`[Int]` for every integer array type); `nil`
    /// when an item is not a constant or does not convert to exactly the element type
    /// (`nil`, `40.5` for integers).
    static func array(_ items: [FetchPredicate.Expression], of type: AttributeType) -> PlannedConstant? {
        guard let elementType = type.elementType else { return nil }
        func elements<Element: AttributeArrayElement>(_: Element.Type) -> PlannedConstant? {
            var result: [Element] = []
            result.reserveCapacity(items.count)
            for item in items {
                guard case .value(let value) = item, let element = convert(value, to: elementType) as? Element else {
                    return nil
                }
                result.append(element)
            }
            return result
        }
        switch elementType {
        case .string: return elements(String.self)
        case .int16, .int32, .int64:
            // (An element beyond the width equals none stored, and the cast would fail.)
            guard let integers = elements(Int.self) as? [Int],
                integers.allSatisfy({ elementType == .int16 ? Int16(exactly: $0) != nil : Int32(exactly: $0) != nil })
                    || elementType == .int64
            else { return nil }
            return integers
        case .double: return elements(Double.self)
        case .float: return elements(Float.self)
        case .decimal: return elements(Decimal.self)
        case .bool: return elements(Bool.self)
        case .date: return elements(Date.self)
        case .uuid: return elements(UUID.self)
        default: return nil
        }
    }

    /// Constants as array parameters, one per Swift type among them (an `IN` list of an
    /// integer attribute may hold `Int`, `Double` and `Decimal` values), for
    /// `= ANY($n)` each.
    static func arrays(_ values: [any PostgresEncodable & Sendable]) -> [any PostgresEncodable] {
        var strings: [String] = [], integers: [Int] = [], keys: [Int64] = [], doubles: [Double] = []
        var floats: [Float] = [], decimals: [Decimal] = [], flags: [Bool] = [], dates: [Date] = []
        var uuids: [UUID] = [], datas: [Data] = []
        for value in values {
            switch value {
            case let value as String: strings.append(value)
            case let value as Int: integers.append(value)
            case let value as Int64: keys.append(value)
            case let value as Double: doubles.append(value)
            case let value as Float: floats.append(value)
            case let value as Decimal: decimals.append(value)
            case let value as Bool: flags.append(value)
            case let value as Date: dates.append(value)
            case let value as UUID: uuids.append(value)
            case let value as Data: datas.append(value)
            default: break  // `convert` makes none of any other type
            }
        }
        let arrays: [(isEmpty: Bool, array: any PostgresEncodable)] = [
            (strings.isEmpty, strings), (integers.isEmpty, integers), (keys.isEmpty, keys),
            (doubles.isEmpty, doubles), (floats.isEmpty, floats), (decimals.isEmpty, decimals),
            (flags.isEmpty, flags), (dates.isEmpty, dates), (uuids.isEmpty, uuids), (datas.isEmpty, datas),
        ]
        return arrays.filter { !$0.isEmpty }.map(\.array)
    }

    /// What a value is, for messages: its kind, never the value itself (an argument of
    /// a predicate is a bound value, which descriptions do not show; an object is named
    /// by its ID).
    static func describe(_ value: FetchPredicate.Value) -> String {
        switch value {
        case .null: return "nil"
        case .string: return "a string"
        case .integer: return "an integer"
        case .double: return "a floating-point number"
        case .decimal: return "a decimal"
        case .bool: return "a boolean"
        case .date: return "a date"
        case .uuid: return "a UUID"
        case .data(let data): return "\(data.count) bytes of data"
        case .object(let id): return "the object \(id)"
        }
    }

    /// An `NSPredicate` `LIKE` pattern (`*` any run, `?` one character, `\` before a
    /// character for that character itself) as an SQL `LIKE` pattern escaped with
    /// backslash.
    ///
    /// A backslash pair is written as the plain character unless SQL `LIKE` needs the
    /// escape (`%`, `_`, `\`), so `[d]` folding, which removes combining marks, cannot
    /// separate an escape from what it escapes; a final lone backslash is a literal
    /// backslash.
    static func likePattern(_ pattern: String) -> String {
        var result = ""
        var escaped = false
        for scalar in pattern.unicodeScalars {
            if escaped {
                escaped = false
                switch scalar {
                case "%", "_", "\\": result += "\\" + String(scalar)
                default: result.unicodeScalars.append(scalar)
                }
                continue
            }
            switch scalar {
            case "\\": escaped = true
            case "*": result += "%"
            case "?": result += "_"
            case "%", "_": result += "\\" + String(scalar)
            default: result.unicodeScalars.append(scalar)
            }
        }
        if escaped { result += "\\\\" }
        return result
    }
}
