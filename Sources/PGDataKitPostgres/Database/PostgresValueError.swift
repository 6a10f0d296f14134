/// A value could not be turned into a parameter, or a column could not be read as the
/// Swift type asked for.
///
/// For example, reading a `NULL` column as a non-optional `String` throws
/// `PostgresValueError` with `reason == .unexpectedNull` and names the column and row.
///
/// The description never shows the value itself (it may be personal data);
/// `debugDescription` adds the text the server sent for `.invalidText`.
public struct PostgresValueError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What was wrong with the value.
    public enum Reason: Sendable, Equatable {
        /// The column is `NULL` but a non-optional type was asked for.
        case unexpectedNull
        /// The text the server sent is not a valid value of the Swift type (shown only by
        /// `debugDescription`).
        case invalidText(String)
        /// The value does not fit the Swift type (overflow, too many digits).
        case outOfRange
        /// A string parameter holds a NUL character, which PostgreSQL text cannot hold.
        case containsNUL
        /// A column index or name that the result does not have.
        case noSuchColumn
        /// A value could not be encoded (for example a JSON value that failed to
        /// serialise).
        case unencodable(String)
    }

    /// What was wrong.
    public var reason: Reason
    /// The Swift type being read or written.
    public var swiftType: String
    /// The column name, when reading a result; `Entity.attribute` when a managed
    /// object's value cannot be encoded on save.
    public var column: String?
    /// The row index, when reading a result.
    public var row: Int?
    /// The column's PostgreSQL type OID, when reading a result.
    public var typeOID: UInt32?

    /// Creates an error; decoders of custom types may throw it too.
    public init(
        reason: Reason, swiftType: String, column: String? = nil, row: Int? = nil,
        typeOID: UInt32? = nil
    ) {
        self.reason = reason
        self.swiftType = swiftType
        self.column = column
        self.row = row
        self.typeOID = typeOID
    }

    /// Says which column of which row, the Swift type and the reason, without the value.
    public var description: String {
        var place = ""
        if let column { place += " column \"\(column)\"" }
        if let row { place += " row \(row)" }
        if let typeOID { place += " (type oid \(typeOID))" }
        let what: String
        switch reason {
        case .unexpectedNull: what = "is NULL but \(swiftType) is not optional"
        case .invalidText:
            what = "cannot be read as \(swiftType): the text is not a valid \(swiftType)"
        case .outOfRange: what = "does not fit in \(swiftType)"
        case .containsNUL: what = "holds a NUL character, which PostgreSQL text cannot store"
        case .noSuchColumn: what = "does not exist in the result"
        case .unencodable(let why): what = "cannot be encoded as \(swiftType): \(why)"
        }
        return place.isEmpty ? "value \(what)" : "value of\(place) \(what)"
    }

    /// The description plus, for `.invalidText`, the text the server sent (up to 60
    /// characters).
    public var debugDescription: String {
        guard case .invalidText(let text) = reason else { return description }
        let shown = text.count > 60 ? String(text.prefix(60)) + "…" : text
        return description + " — text: \"" + shown + "\""
    }
}
