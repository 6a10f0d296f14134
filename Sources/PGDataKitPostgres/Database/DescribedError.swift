/// The code of a PGDataKit error: a struct of named values (`ConnectionPoolError.Code.timedOut`,
/// `PostgresError.Code.connectionLost`, `ImportError.Code.missingKey`) that a `catch`
/// clause can match.
///
/// Every public error type of PGDataKit has a `code` whose type conforms, and `~=` lets
/// a code stand as a pattern for a thrown error: it matches an error of the type the code
/// belongs to, with that code. `SQLState` matches server errors the same way. For example:
///
/// ```swift
/// do {
///     try pool.withConnection { connection in
///         _ = try connection.execute("UPDATE stock SET count = count - 1 WHERE item = $1", [item])
///     }
/// } catch ConnectionPoolError.Code.timedOut {
///     // every connection stayed busy: try again later
/// } catch SQLState.lockNotAvailable {
///     // another transaction holds the row past lock_timeout
/// } catch let error as PostgresError where error.code == .connectionLost {
///     print(error)   // the error's fields need the binding
/// }
/// ```
///
/// A code is backed by an internal enum: codes compare by case, no code can be made from
/// a string, and a code of one error type never matches an error of another. The types
/// are structs rather than enums so that later versions can add codes without breaking a
/// caller's `switch`, which therefore needs a `default:`.
public protocol ErrorCode: Hashable, Sendable, CustomStringConvertible {}

extension ErrorCode {
    /// Whether `error` is a PGDataKit error whose code is `code`: lets a code stand as a
    /// `catch` or `case` pattern (`catch ImportError.Code.missingKey { … }`).
    ///
    /// - Parameters:
    ///   - code: The code to look for.
    ///   - error: The thrown error; an error of another type never matches.
    public static func ~= (code: Self, error: any Error) -> Bool {
        guard let error = error as? any DescribedError, let errorCode = error.code as? Self else { return false }
        return errorCode == code
    }
}

/// The one way PGDataKit's errors describe themselves.
///
/// An error is a struct with an extensible `code` (an `ErrorCode`: a struct of named
/// values, so a new code breaks no caller's `switch`), a `message` and typed context
/// fields. Every public error type conforms. Conforming gives it both descriptions:
///
/// - `description` is the message: one sentence that names what failed (entity,
///   attribute, key, record index, types, tokens…) and what to do, and never shows a
///   value that can be personal data (attribute values, bound parameters, record
///   members, text the server sent). A type whose description says more than its
///   message (`PostgresError`'s statement and hint, `FetchPredicateError`'s caret under
///   the format string) implements `description` itself, under the same rule.
/// - `debugDescription` is `Type.code: message`, then every context field by name,
///   including those that hold values:
///   `ImportError.typeMismatch: record 3: … [recordIndex: 3, key: "age", value: "x"]`.
///   A type whose message is not the whole story (`PostgresError`, `MergeConflictError`)
///   puts the fuller text in `debugMessage`.
///
/// A type lists its context in `contextFields`: `.name` fields (safe to log) and
/// `.value` fields (data: only `debugDescription` shows them).
package protocol DescribedError: Error, CustomStringConvertible, CustomDebugStringConvertible {
    /// The type of the error's code (a struct of named values).
    associatedtype Code: ErrorCode
    /// What went wrong, broadly.
    var code: Code { get }
    /// One sentence without values.
    var message: String { get }
    /// What `debugDescription` shows after `Type.code: `; `message` unless the type has
    /// a fuller text (which may show values).
    var debugMessage: String { get }
    /// The context fields in the order `debugDescription` shows them; `nil` entries
    /// (fields this error does not have) are left out.
    var contextFields: [ErrorContextField?] { get }
}

/// One named piece of an error's context, as `debugDescription` shows it.
package struct ErrorContextField: Sendable {
    /// The property's name, such as `entity` or `recordIndex`.
    var label: String
    /// Its text.
    var text: String

    /// A field that names things (an entity, a key, a type, a count): never data.
    package static func name(_ label: String, _ value: (any CustomStringConvertible)?) -> ErrorContextField? {
        value.map { ErrorContextField(label: label, text: "\($0)") }
    }

    /// A list of names, left out when empty.
    package static func names(_ label: String, _ values: [some CustomStringConvertible]) -> ErrorContextField? {
        values.isEmpty ? nil : ErrorContextField(label: label, text: "[" + values.map { "\($0)" }.joined(separator: ", ") + "]")
    }

    /// A value that may be personal data (a record member, text the server sent), quoted
    /// and cut at `limit` characters (60 unless given; `nil` shows it in full).
    package static func value(_ label: String, _ value: String?, limit: Int? = 60) -> ErrorContextField? {
        value.map { value in
            let shown = limit.map { value.count > $0 ? String(value.prefix($0)) + "…" : value } ?? value
            return ErrorContextField(label: label, text: "\"" + shown + "\"")
        }
    }

    /// Values that may be personal data, each rendered already (bound parameters), in
    /// full; left out when `nil` or empty.
    package static func values(_ label: String, _ values: [String]?) -> ErrorContextField? {
        guard let values, !values.isEmpty else { return nil }
        return ErrorContextField(label: label, text: "[" + values.joined(separator: ", ") + "]")
    }

    /// An underlying error, by its debug description.
    package static func underlying(_ label: String, _ error: (any Error)?) -> ErrorContextField? {
        error.map { ErrorContextField(label: label, text: String(reflecting: $0)) }
    }
}

extension DescribedError {
    /// The message: what failed and what to do, without values that can be personal data.
    public var description: String { message }

    /// The message.
    package var debugMessage: String { message }

    /// `Type.code: message [field: value, …]`: the message and every context field,
    /// values included. For debugging; logs take `description`.
    public var debugDescription: String {
        let fields = contextFields.compactMap { $0 }.map { "\($0.label): \($0.text)" }
        let head = "\(Self.self).\(code): \(debugMessage)"
        return fields.isEmpty ? head : head + " [" + fields.joined(separator: ", ") + "]"
    }
}
