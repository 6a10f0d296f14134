/// `import PGDataKit` gives the PostgreSQL client too (`Connection`, `ConnectionPool`,
/// `PostgresError`, `EmbeddedPostgres`…): it lives in the `PGDataKitPostgres` module, which
/// programs that need only a client can import alone.
@_exported import PGDataKitPostgres
