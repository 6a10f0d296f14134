import Foundation

// MARK: - Arguments

extension FetchPredicate {
    /// Converts a value the way a `%@` argument is converted: `nil` and `NSNull` to
    /// `.null`, Swift and Foundation values to the matching `Value`, an enum (any
    /// `RawRepresentable` type) to its raw value's, saved managed objects and `ObjectID`s
    /// to `.object`, arrays and sets to a `.list`.
    ///
    /// - Throws: `FetchPredicateError` (without a position) naming a type that cannot be used.
    static func argumentExpression(_ argument: Any?) throws(FetchPredicateError) -> Expression {
        try Expression(argument: argument)
    }
}

/// Arrays and sets, whose elements become a list.
private protocol ListArgument {
    var listElements: [Any?] { get }
}

extension Array: ListArgument {
    fileprivate var listElements: [Any?] { map { $0 } }
}

extension Set: ListArgument {
    fileprivate var listElements: [Any?] { map { $0 } }
}

extension NSArray: ListArgument {
    fileprivate var listElements: [Any?] { map { $0 } }
}

extension NSSet: ListArgument {
    fileprivate var listElements: [Any?] { allObjects.map { $0 } }
}

/// Lets an `Optional` hidden in an `Any` be unwrapped.
private protocol OptionalArgument {
    var wrappedArgument: Any? { get }
}

extension Optional: OptionalArgument {
    fileprivate var wrappedArgument: Any? {
        switch self {
        case .some(let wrapped): return wrapped
        case .none: return nil
        }
    }
}

extension FetchPredicate.Expression {
    /// Converts a `%@` argument or a variable's value: a value, or a list for arrays
    /// and sets.
    ///
    /// The common types are matched by their exact type first (`FetchPredicate.Value(exactly:)`,
    /// `typedList`): the general path below asks the runtime for a protocol conformance or
    /// a bridging cast per candidate type, about 7,700 instructions per element of an
    /// `IN %@` list of strings, against a few hundred this way.
    init(argument: Any?, inList: Bool = false) throws(FetchPredicateError) {
        if let argument {
            if let value = FetchPredicate.Value(exactly: argument) {
                self = .value(value)
                return
            }
            if let list = Self.typedList(argument) {
                guard !inList else {
                    throw FetchPredicateError(code: .invalidArgument, message: "nested arrays are not supported")
                }
                self = .list(list)
                return
            }
        }
        var argument = argument
        // Unwrap optionals boxed in the `Any` (a `String?` passed as an argument); a bare
        // `nil` must not be cast, as `Optional.none` itself conforms to the protocol.
        while let value = argument, let optional = value as? OptionalArgument {
            argument = optional.wrappedArgument
        }
        guard let argument else {
            self = .value(.null)
            return
        }
        if let list = argument as? ListArgument {
            guard !inList else {
                throw FetchPredicateError(code: .invalidArgument, message: "nested arrays are not supported")
            }
            self = .list(try list.listElements.map { element throws(FetchPredicateError) in
                try Self(argument: element, inList: true)
            })
            return
        }
        self = .value(try FetchPredicate.Value(argument: argument))
    }
}

extension FetchPredicate.Expression {
    /// The list of an array or set of a common element type, converted without a cast
    /// per element; `nil` for any other argument.
    fileprivate static func typedList(_ argument: Any) -> [Self]? {
        switch ObjectIdentifier(type(of: argument)) {
        case ObjectIdentifier([String].self): return (argument as? [String])?.map { .value(.string($0)) }
        case ObjectIdentifier([Int].self): return (argument as? [Int])?.map { .value(.integer(Int64($0))) }
        case ObjectIdentifier([Int64].self): return (argument as? [Int64])?.map { .value(.integer($0)) }
        case ObjectIdentifier([UUID].self): return (argument as? [UUID])?.map { .value(.uuid($0)) }
        case ObjectIdentifier(Set<String>.self): return (argument as? Set<String>)?.map { .value(.string($0)) }
        case ObjectIdentifier(Set<Int>.self): return (argument as? Set<Int>)?.map { .value(.integer(Int64($0))) }
        case ObjectIdentifier(Set<Int64>.self): return (argument as? Set<Int64>)?.map { .value(.integer($0)) }
        default: return nil
        }
    }
}

extension FetchPredicate.Value {
    /// Converts an argument of a common Swift type, matched by its exact dynamic type (a
    /// comparison of type identities, then a cast to that very type); `nil` for any other
    /// type, which `init(argument:)` converts. Gives what `init(argument:)` gives.
    fileprivate init?(exactly argument: Any) {
        func cast<T>(_ make: (T) -> Self) -> Self? { (argument as? T).map(make) }
        let value: Self?
        switch ObjectIdentifier(type(of: argument)) {
        case ObjectIdentifier(String.self): value = cast(Self.string)
        case ObjectIdentifier(Int.self): value = cast { (integer: Int) in .integer(Int64(integer)) }
        case ObjectIdentifier(Int64.self): value = cast(Self.integer)
        case ObjectIdentifier(Int32.self): value = cast { (integer: Int32) in .integer(Int64(integer)) }
        case ObjectIdentifier(Bool.self): value = cast(Self.bool)
        case ObjectIdentifier(Double.self): value = cast(Self.double)
        case ObjectIdentifier(UUID.self): value = cast(Self.uuid)
        case ObjectIdentifier(Date.self): value = cast(Self.date)
        default: value = nil
        }
        guard let value else { return nil }
        self = value
    }

    /// Converts one argument that is not `nil` and not a list.
    fileprivate init(argument: Any) throws(FetchPredicateError) {
        if let decimal = argument as? NSDecimalNumber, type(of: argument) is NSNumber.Type {
            self = .decimal(decimal.decimalValue)
            return
        }
        if type(of: argument) is NSNumber.Type, let number = argument as? NSNumber {
            if type(of: number) == type(of: NSNumber(value: true)) {
                self = .bool(number.boolValue)
            } else if [UInt8(ascii: "f"), UInt8(ascii: "d")]
                .contains(UInt8(bitPattern: number.objCType.pointee))
            {
                self = .double(number.doubleValue)
            } else {
                self = .integer(number.int64Value)
            }
            return
        }
        switch argument {
        case is NSNull: self = .null
        case let value as Bool: self = .bool(value)
        case let value as String: self = .string(value)
        case let value as any StringProtocol: self = .string(String(value))
        case let value as any BinaryInteger:
            guard let integer = Int64(exactly: value) else {
                throw FetchPredicateError(code: .invalidArgument, message: "an integer argument of type \(type(of: value)) does not fit in 64 bits")
            }
            self = .integer(integer)
        case let value as any BinaryFloatingPoint: self = .double(Double(value))
        case let value as Decimal: self = .decimal(value)
        case let value as Date: self = .date(value)
        case let value as UUID: self = .uuid(value)
        case let value as Data: self = .data(value)
        case is JSONValue:
            throw FetchPredicateError(
                code: .invalidArgument, message: "JSONValue arguments are not supported in predicates")
        case let object as ManagedObject:
            guard object.objectID.primaryKey != nil else {
                throw FetchPredicateError(
                    code: .invalidArgument, message: "object must be saved before it is used in a predicate "
                        + "(\(object.objectID.entityName) has a temporary ID)")
            }
            self = .object(object.objectID)
        case let id as ObjectID: self = .object(id)
        case is any AttributeCodable:
            throw FetchPredicateError(
                code: .invalidArgument,
                message: "\(type(of: argument)) arguments (AttributeCodable) are not supported in predicates: "
                    + "their JSON is not compared; compare the attribute with nil")
        case let value as any RawRepresentable:
            // An enum (an `AttributeEnum` among them) is compared by its raw value, as it is
            // stored.
            let raw: Any = value.rawValue
            guard !(raw is any RawRepresentable) else {
                throw FetchPredicateError(
                    code: .invalidArgument, message: "cannot use a value of type \(type(of: argument)) in a predicate")
            }
            self = try Self(argument: raw)
        default:
            throw FetchPredicateError(
                code: .invalidArgument, message: "cannot use a value of type \(type(of: argument)) in a predicate")
        }
    }
}
