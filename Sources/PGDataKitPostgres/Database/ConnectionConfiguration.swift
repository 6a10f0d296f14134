internal import CLibPQ

/// Where and how to connect: a `postgres://` URL or a libpq `key=value` string, plus
/// parameters that override it.
///
/// For example:
///
/// ```swift
/// let configuration = ConnectionConfiguration("postgres://app@localhost:5432/app")
///     .database("app_test")
/// let connection = try Connection(configuration)
/// ```
///
/// Overrides are handed to libpq as separate key words, never spliced into the string,
/// so no value needs quoting. `description`, `debugDescription` and `dump` never show the
/// password. A URL must start with `postgres://` or `postgresql://`: any other scheme
/// (`jdbc:postgresql://`, `postgresql+psycopg2://`) is refused before libpq sees it,
/// since libpq would quote it, password and all, in its error.
public struct ConnectionConfiguration: Sendable, CustomStringConvertible {
    /// The URL or `key=value` string as given.
    public var connectionString: String
    /// libpq key words that replace what the string says (`dbname`, `user`,
    /// `application_name`, `connect_timeout`, …), applied in key order.
    public var overrides: [String: String]
    /// How many named prepared statements a connection keeps (256 by default; 0 turns
    /// them off).
    ///
    /// A statement sent with parameters is prepared the first time a connection sends
    /// it and afterwards only bound and executed, which saves the server a parse and a
    /// plan per call: a batch import's statements, whose parameters are arrays of a
    /// thousand values, run markedly faster. Past the limit the least recently used
    /// statement is dropped (`DEALLOCATE`, sent before the next statement outside a
    /// transaction). A statement the server no longer knows
    /// (after `DISCARD ALL`) or whose result columns changed (after an `ALTER TABLE`
    /// under a `SELECT *`) is prepared again; outside a transaction the call is retried
    /// at once, inside one the transaction fails with that error and the retry is the
    /// caller's. Behind a connection pooler in transaction mode no statement is prepared
    /// by name, whatever this says (see `pooling`: detected at connect, or set); set 0
    /// yourself to turn preparing off anywhere.
    ///
    /// After five executions PostgreSQL may switch a prepared statement to a generic plan
    /// (see `plan_cache_mode`), as it does for any client that prepares statements.
    ///
    /// For example:
    ///
    /// ```swift
    /// var configuration = ConnectionConfiguration("postgres://app@db:5432/app")
    /// configuration.preparedStatementCacheSize = 0
    /// ```
    public var preparedStatementCacheSize = 256

    /// How long a statement waits for a lock before it fails with SQLSTATE `55P03`
    /// (`SQLState.lockNotAvailable`): 5 seconds by default; `nil` keeps the server's
    /// setting (`lock_timeout`, no limit unless configured).
    ///
    /// PGDataKit's own saves take their row locks in one global order, so they wait for
    /// each other only briefly and never in a cycle; what can still hold a row for long
    /// is another program (or a transaction of yours left open). The limit turns such a
    /// wait into an error: units of work the library owns (imports, `DataOperation`s)
    /// retry it a bounded number of times with a jittered pause; a `save()` of your own
    /// throws it as a `PostgresError` whose `isTransient` is true. It is set once per
    /// session (`SET lock_timeout`), so it applies to every statement of connections
    /// made with this configuration, migrations included; through a pooler in
    /// transaction mode (see `pooling`) it is set in every transaction the library
    /// begins instead.
    ///
    /// For example:
    ///
    /// ```swift
    /// var configuration = ConnectionConfiguration("postgres://app@db/app")
    /// configuration.lockTimeout = .milliseconds(500)
    /// ```
    public var lockTimeout: Duration? = .seconds(5)

    /// Whether session state lasts between transactions: `.automatic` (the default)
    /// detects a connection pooler at connect, `.session` and `.transaction` say so.
    ///
    /// Through a pooler in transaction mode (PgBouncer's `pool_mode = transaction`)
    /// named prepared statements are off whatever `preparedStatementCacheSize` says (a
    /// named statement would be prepared in one server process and looked for in
    /// another: PgBouncer 1.18 has no protocol-level prepared statements), and the
    /// settings the library relies on (`lockTimeout`, `bytea_output`,
    /// `extra_float_digits`) are set in each transaction it begins. `LISTEN` cannot work
    /// there at all: give the change listener a direct connection
    /// (`StoreCoordinator`'s `listenerConfiguration`).
    ///
    /// For example:
    ///
    /// ```swift
    /// var pooled = ConnectionConfiguration("postgres://app@pgbouncer:6432/app")
    /// pooled.pooling = .transaction   // say so rather than detect it
    /// ```
    public var pooling: ConnectionPooling = .automatic

    /// The `lock_timeout` setting in whole milliseconds (at least 1; `nil` when unset).
    var lockTimeoutMilliseconds: Int64? {
        guard let lockTimeout else { return nil }
        let (seconds, attoseconds) = lockTimeout.components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow, seconds >= 0 else { return seconds < 0 ? 1 : Int64(Int32.max) }
        return Swift.max(1, Swift.min(Int64(Int32.max), product &+ attoseconds / 1_000_000_000_000_000))
    }

    /// Wraps a `postgres://` / `postgresql://` URL or a libpq `key=value` string.
    public init(_ connectionString: String, overrides: [String: String] = [:]) {
        self.connectionString = connectionString
        self.overrides = overrides
    }

    /// The same configuration with `application_name` set, so that `pg_stat_activity`
    /// shows what a session is from its start.
    package func named(_ applicationName: String) -> ConnectionConfiguration {
        var copy = self
        copy.overrides["application_name"] = applicationName
        return copy
    }

    /// The same server and credentials, another database.
    public func database(_ name: String) -> ConnectionConfiguration {
        var copy = self
        copy.overrides["dbname"] = name
        return copy
    }

    /// The effective libpq parameters (string parsed, overrides applied), or `nil` when
    /// the string cannot be parsed or is a URL of another scheme. Includes the password,
    /// if any: do not log it.
    public func parameters() -> [String: String]? {
        guard schemeProblem == nil else { return nil }
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            if let error { PQfreemem(error) }
            return nil
        }
        defer { PQconninfoFree(options) }
        var result: [String: String] = [:]
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val {
                result[String(cString: keyword)] = String(cString: value)
            }
            cursor += 1
        }
        for (key, value) in overrides { result[key] = value }
        return result
    }

    /// A libpq `key=value` string equivalent to this configuration, with every value
    /// quoted, for handing to another program (such as a child process).
    public func renderedConnectionString() -> String? {
        guard let parameters = parameters() else { return nil }
        return parameters.keys.sorted().map { key in
            let value = parameters[key] ?? ""
            var quoted = "'"
            for character in value {
                if character == "'" || character == "\\" { quoted.append("\\") }
                quoted.append(character)
            }
            return "\(key)=\(quoted)'"
        }.joined(separator: " ")
    }

    /// `user@host:port/database` without the password; with several hosts (a multi-host
    /// URL such as `postgresql://app@db1:5432,db2:5432/shop`), each with its port:
    /// `app@db1:5432,db2:5432/shop`.
    public var description: String {
        guard let parameters = parameters() else { return "<unparseable connection string>" }
        let user = parameters["user"] ?? "<default user>"
        let database = parameters["dbname"] ?? user
        return "\(user)@\(Self.endpoints(parameters))/\(database)"
    }

    /// `host:port` for each host libpq will try, comma-separated. libpq takes a list of
    /// hosts (`host` or `hostaddr`) and either one port for all or one per host; an empty
    /// entry means the default.
    static func endpoints(_ parameters: [String: String]) -> String {
        let hostList = parameters["host"] ?? parameters["hostaddr"] ?? ""
        let hosts = hostList.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let ports = (parameters["port"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        return hosts.indices.map { index in
            let host = hosts[index].isEmpty ? "localhost" : hosts[index]
            let port = ports.count == hosts.count ? ports[index] : ports.first ?? ""
            return "\(host):\(port.isEmpty ? "5432" : port)"
        }.joined(separator: ",")
    }
}
