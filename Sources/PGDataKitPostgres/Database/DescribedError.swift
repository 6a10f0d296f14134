/// The one way PGDataKit's errors describe themselves.
///
/// An error is a struct with an extensible `code` (a struct of named values, so a new
/// code breaks no caller's `switch`), a `message` and typed context fields. Conforming
/// gives it both descriptions:
///
/// - `description` is the message: one sentence that names what failed (entity,
///   attribute, key, record index, types, tokens…) and what to do, and never shows a
///   value that can be personal data (attribute values, bound parameters, record
///   members, text the server sent).
/// - `debugDescription` is `Type.code: message`, then every context field by name,
///   including those that hold values:
///   `ImportError.typeMismatch: record 3: … [recordIndex: 3, key: "age", value: "x"]`.
///
/// A type lists its context in `contextFields`: `.name` fields (safe to log) and
/// `.value` fields (data: only `debugDescription` shows them).
package protocol DescribedError: Error, CustomStringConvertible, CustomDebugStringConvertible {
    /// The type of the error's code (a struct of named values).
    associatedtype Code: CustomStringConvertible
    /// What went wrong, broadly.
    var code: Code { get }
    /// One sentence without values.
    var message: String { get }
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
    /// and cut at 60 characters.
    package static func value(_ label: String, _ value: String?) -> ErrorContextField? {
        value.map { value in
            let shown = value.count > 60 ? String(value.prefix(60)) + "…" : value
            return ErrorContextField(label: label, text: "\"" + shown + "\"")
        }
    }

    /// An underlying error, by its debug description.
    package static func underlying(_ label: String, _ error: (any Error)?) -> ErrorContextField? {
        error.map { ErrorContextField(label: label, text: String(reflecting: $0)) }
    }
}

extension DescribedError {
    /// The message: what failed and what to do, without values that can be personal data.
    public var description: String { message }

    /// `Type.code: message [field: value, …]`: the message and every context field,
    /// values included. For debugging; logs take `description`.
    public var debugDescription: String {
        let fields = contextFields.compactMap { $0 }.map { "\($0.label): \($0.text)" }
        let head = "\(Self.self).\(code): \(message)"
        return fields.isEmpty ? head : head + " [" + fields.joined(separator: ", ") + "]"
    }
}
