/// The names PGDataKit's spans use (swift-distributed-tracing): operations, span
/// attributes and events, after OpenTelemetry's database conventions where one applies
/// (`db.*`, `server.*`, `error.type`) and under `pgdatakit.` where none does.
///
/// A span is named after its operation and, when it has one, its table: `fetch users`,
/// `save users`, `import users`, `refresh users`; `save` and `merge` alone when they touch
/// several tables. Attributes carry names, counts and codes — never a bound value, a
/// literal of a statement, a key, or a server message (which may quote values).
///
/// For example, a test tracer picking out the library's save spans:
///
/// ```swift
/// let isSave = span.attributes.get(PGDataKitTracing.operationName) == .string(PGDataKitTracing.save)
/// ```
public enum PGDataKitTracing {
    // MARK: Operations (`db.operation.name`)

    /// A root context's save: its whole transaction, retries included.
    public static let save = "save"
    /// A fetch request sent to the server (`fetch(_:)`, `fetchObjectIDs(_:)`,
    /// `fetchDictionaries(_:)`).
    public static let fetch = "fetch"
    /// A count request sent to the server (`count(for:)`).
    public static let count = "count"
    /// Another context's or process's saved changes merged into a context.
    public static let merge = "merge"
    /// Object controllers brought up to date after a save or a merge (one membership
    /// query per entity), or a controller's `performFetch()`.
    public static let refresh = "refresh"
    /// One batch of an import (`insertOrUpdate`, `importRecords`, an import operation):
    /// its key fetch and, where the import saves, its save and redos.
    public static let importBatch = "import"

    // MARK: Attributes

    /// `db.system`: always `postgresql` (the older key).
    public static let system = "db.system"
    /// `db.system.name`: always `postgresql` (the newer key).
    public static let systemName = "db.system.name"
    /// The value of `system` and `systemName`.
    public static let postgresql = "postgresql"
    /// `db.operation.name`: one of the operations above.
    public static let operationName = "db.operation.name"
    /// `db.collection.name`: the table, when the operation is about one entity.
    public static let collectionName = "db.collection.name"
    /// `db.namespace`: the database name.
    public static let namespace = "db.namespace"
    /// `server.address`: the host of the connection configuration (one host only).
    public static let serverAddress = "server.address"
    /// `server.port`: the port of the connection configuration (one port only).
    public static let serverPort = "server.port"
    /// `db.response.returned_rows`: objects or rows a fetch returned, or the count.
    public static let returnedRows = "db.response.returned_rows"
    /// `db.response.status_code`: the SQLSTATE of a failed operation's database error.
    public static let statusCode = "db.response.status_code"
    /// `error.type`: a failed operation's SQLSTATE, or the Swift type of its error.
    public static let errorType = "error.type"
    /// The entity the operation is about, when it is about one.
    public static let entity = "pgdatakit.entity"
    /// The entities a save or merge touched, sorted and comma-separated, when several.
    public static let entities = "pgdatakit.entities"
    /// `main` or `private`: the kind of context.
    public static let context = "pgdatakit.context"
    /// Statements the operation sent (the `BEGIN` that travels with the first counts
    /// as one), as `StoreCoordinator.statementCount` counts them.
    public static let statements = "pgdatakit.statements"
    /// Times the library redid the work (a save redone read-committed, an import batch
    /// redone); each redo is also a `retry` event with its `cause`.
    public static let retries = "pgdatakit.retries"
    /// Objects inserted by a save or a merge.
    public static let inserted = "pgdatakit.objects.inserted"
    /// Objects updated by a save or a merge.
    public static let updated = "pgdatakit.objects.updated"
    /// Objects deleted by a save or a merge.
    public static let deleted = "pgdatakit.objects.deleted"
    /// Records in an import batch.
    public static let records = "pgdatakit.records"
    /// Object controllers a refresh brought up to date.
    public static let controllers = "pgdatakit.controllers"

    // MARK: Events

    /// The event of one redo; its `cause` attribute is one of the causes of
    /// `PGDataKitMetrics.retries` (`conflict`, `serialization`, `deadlock`,
    /// `lock_timeout`, `statement_lost`, `connection_lost`, `row_held`, `other`).
    public static let retryEvent = "retry"
    /// The attribute of a `retry` event that names its cause.
    public static let cause = "pgdatakit.cause"
}
