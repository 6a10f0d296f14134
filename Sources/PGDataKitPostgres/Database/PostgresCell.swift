/// The raw text of one field of a result row, handed to `PostgresDecodable.decode(from:)`.
///
/// The bytes are valid only during the `decode` call; a decoder copies what it keeps.
public struct PostgresCell {
    /// The field's bytes in PostgreSQL's text format, or `nil` for `NULL`.
    public let bytes: UnsafeBufferPointer<UInt8>?
    /// The column's type OID (0 when unknown, for example inside an array).
    public let typeOID: UInt32
    /// The column name, for error messages.
    public let columnName: String?
    /// The row index, for error messages.
    public let rowIndex: Int?

    /// Creates a cell over bytes that stay valid while it is used.
    public init(
        bytes: UnsafeBufferPointer<UInt8>?, typeOID: UInt32 = 0, columnName: String? = nil,
        rowIndex: Int? = nil
    ) {
        self.bytes = bytes
        self.typeOID = typeOID
        self.columnName = columnName
        self.rowIndex = rowIndex
    }

    /// Whether the field is `NULL`.
    public var isNull: Bool { bytes == nil }

    /// The field as a Swift string (empty for `NULL`).
    public var string: String {
        guard let bytes else { return "" }
        return SmallText.decoded(bytes)
    }

    /// The non-NULL bytes, or an `unexpectedNull` error naming `type`.
    public func requireBytes<T>(for type: T.Type) throws -> UnsafeBufferPointer<UInt8> {
        guard let bytes else { throw error(.unexpectedNull, for: type) }
        return bytes
    }

    /// An error about this cell, for decoders.
    public func error<T>(_ code: PostgresValueError.Code, for type: T.Type) -> PostgresValueError {
        PostgresValueError(
            code: code, swiftType: String(describing: type), column: columnName,
            row: rowIndex, typeOID: typeOID)
    }

    /// An `invalidText` error carrying this cell's text (which only its
    /// `debugDescription` shows).
    public func invalid<T>(for type: T.Type) -> PostgresValueError {
        var error = error(.invalidText, for: type)
        error.text = string
        return error
    }
}
