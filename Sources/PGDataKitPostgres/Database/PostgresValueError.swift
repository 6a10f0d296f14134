/// A value could not be turned into a parameter, or a column could not be read as the
/// Swift type asked for.
///
/// For example, reading a `NULL` column as a non-optional `String` throws
/// `PostgresValueError` with `code == .unexpectedNull` and names the column and row:
///
/// ```swift
/// do {
///     let name = try rows[0].decode(String.self, at: 0)
/// } catch let error as PostgresValueError where error.code == .unexpectedNull {
///     print(error)   // value of column "name" row 0 (type oid 25) is NULL but String is not optional
/// }
/// ```
///
/// The description never shows the value itself (it may be personal data);
/// `debugDescription` adds the text the server sent for `.invalidText`.
public struct PostgresValueError: Error, Sendable, Equatable, DescribedError {
    /// What was wrong with the value.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch PostgresValueError.Code.unexpectedNull { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case unexpectedNull, invalidText, outOfRange, containsNUL, noSuchColumn, unencodable
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The column is `NULL` but a non-optional type was asked for.
        public static let unexpectedNull = Code(.unexpectedNull)
        /// The text the server sent (`text`, shown only by `debugDescription`) is not a
        /// valid value of the Swift type.
        public static let invalidText = Code(.invalidText)
        /// The value does not fit the Swift type (overflow, too many digits).
        public static let outOfRange = Code(.outOfRange)
        /// A string parameter holds a NUL character, which PostgreSQL text cannot hold.
        public static let containsNUL = Code(.containsNUL)
        /// A column index or name that the result does not have.
        public static let noSuchColumn = Code(.noSuchColumn)
        /// A value could not be encoded (for example a JSON value that failed to
        /// serialise); `reason` says why.
        public static let unencodable = Code(.unencodable)

        /// The code's name, such as `unexpectedNull`.
        public var description: String { base.rawValue }
    }

    /// What was wrong.
    public var code: Code
    /// The Swift type being read or written.
    public var swiftType: String
    /// The column name, when reading a result; `Entity.attribute` when a managed
    /// object's value cannot be encoded on save.
    public var column: String?
    /// The row index, when reading a result.
    public var row: Int?
    /// The column's PostgreSQL type OID, when reading a result.
    public var typeOID: UInt32?
    /// The text the server sent (`invalidText`): data, shown only by
    /// `debugDescription` (up to 60 characters).
    public var text: String?
    /// Why the value cannot be encoded (`unencodable`), without the value.
    public var reason: String?

    /// Creates an error; decoders of custom types may throw it too.
    ///
    /// For example:
    ///
    /// ```swift
    /// throw PostgresValueError(code: .unencodable, swiftType: "Money", reason: "no currency")
    /// ```
    public init(
        code: Code, swiftType: String, column: String? = nil, row: Int? = nil, typeOID: UInt32? = nil,
        text: String? = nil, reason: String? = nil
    ) {
        self.code = code
        self.swiftType = swiftType
        self.column = column
        self.row = row
        self.typeOID = typeOID
        self.text = text
        self.reason = reason
    }

    /// Says which column of which row, the Swift type and what is wrong, without the
    /// value.
    public var message: String {
        var place = ""
        if let column { place += " column \"\(column)\"" }
        if let row { place += " row \(row)" }
        if let typeOID { place += " (type oid \(typeOID))" }
        let what: String
        switch code {
        case .unexpectedNull: what = "is NULL but \(swiftType) is not optional"
        case .invalidText: what = "cannot be read as \(swiftType): the text is not a valid \(swiftType)"
        case .outOfRange: what = "does not fit in \(swiftType)"
        case .containsNUL: what = "holds a NUL character, which PostgreSQL text cannot store"
        case .noSuchColumn: what = "does not exist in the result"
        case .unencodable: what = "cannot be encoded as \(swiftType): \(reason ?? "unsupported value")"
        default: what = "cannot be used as \(swiftType) (\(code))"
        }
        return place.isEmpty ? "value \(what)" : "value of\(place) \(what)"
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("swiftType", swiftType), .name("column", column), .name("row", row), .name("typeOID", typeOID),
            .name("reason", reason), .value("text", text),
        ]
    }
}
