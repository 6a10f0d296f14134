/// The PostgreSQL type a parameter is sent as: its OID and the OID of its array type.
///
/// `.unknown` (OID 0) lets the server infer the type from where the parameter is used,
/// which is what strings use so that they fit `text`, `varchar`, `uuid` or enum columns.
public struct PostgresType: Sendable, Hashable {
    /// The type's OID.
    public var oid: UInt32
    /// The OID of the array of this type (0 to let the server infer it).
    public var arrayOID: UInt32

    /// Creates a type from its OIDs.
    public init(oid: UInt32, arrayOID: UInt32) {
        self.oid = oid
        self.arrayOID = arrayOID
    }

    /// Let the server infer the type.
    public static let unknown = PostgresType(oid: 0, arrayOID: 0)
    /// `boolean`.
    public static let bool = PostgresType(oid: 16, arrayOID: 1000)
    /// `bytea`.
    public static let bytea = PostgresType(oid: 17, arrayOID: 1001)
    /// `bigint`.
    public static let int8 = PostgresType(oid: 20, arrayOID: 1016)
    /// `smallint`.
    public static let int2 = PostgresType(oid: 21, arrayOID: 1005)
    /// `integer`.
    public static let int4 = PostgresType(oid: 23, arrayOID: 1007)
    /// `text`.
    public static let text = PostgresType(oid: 25, arrayOID: 1009)
    /// `real`.
    public static let float4 = PostgresType(oid: 700, arrayOID: 1021)
    /// `double precision`.
    public static let float8 = PostgresType(oid: 701, arrayOID: 1022)
    /// `timestamp with time zone`.
    public static let timestamptz = PostgresType(oid: 1184, arrayOID: 1185)
    /// `numeric`.
    public static let numeric = PostgresType(oid: 1700, arrayOID: 1231)
    /// `uuid`.
    public static let uuid = PostgresType(oid: 2950, arrayOID: 2951)
    /// `jsonb`.
    public static let jsonb = PostgresType(oid: 3802, arrayOID: 3807)
    /// `tid`, a row version's location (`ctid`): what a save sends back of the rows an
    /// import read.
    package static let tid = PostgresType(oid: 27, arrayOID: 1010)
}
