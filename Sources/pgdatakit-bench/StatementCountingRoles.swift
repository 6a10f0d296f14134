import Foundation
import PGDataKit

/// Database roles that some processes of a benchmark log in as, so that the server counts
/// their statements apart from everyone else's: `pg_stat_statements` keeps its counts per
/// role (`userid`) and database (`dbid`), so the counts are the server's, not the
/// library's.
///
/// For example:
///
/// ```swift
/// let roles = StatementCountingRoles.create(["idle"], on: admin)
/// defer { roles.drop(on: admin) }
/// let child = roles.configuration(for: "idle", base: database.configuration)
/// let before = try roles.snapshot(on: admin)
/// // … the idle processes run …
/// let calls = roles.calls(of: "idle", from: before, to: try roles.snapshot(on: admin))
/// ```
///
/// Made on a connection to the benchmark's database as a superuser (the bench server's
/// `postgres`): each role may log in, and gets `USAGE` on the current schema and DML on
/// its tables and sequences (the example schema and the change log) — what the library
/// needs at runtime. When a role cannot be made, its processes connect as the URL's user
/// and nothing is counted; when `pg_stat_statements` is not loaded on the server,
/// `unavailableReason` says so and counts are `nil`.
final class StatementCountingRoles {
    /// The role made for each name given to `create` (missing when it could not be made).
    private(set) var roles: [String: String] = [:]
    /// Why statements cannot be counted, or `nil` when they can.
    private(set) var unavailableReason: String?

    /// One role's statements at one moment: calls and text by `queryid`.
    typealias Snapshot = [String: [Int64: (calls: Int, query: String)]]

    private init() {}

    /// Makes a role per name (`pgdatakit_fanout_<random>_<name>`) and the
    /// `pg_stat_statements` extension in the connection's database. Never throws: what
    /// fails is noted in `unavailableReason`.
    static func create(_ names: [String], on admin: Connection) -> StatementCountingRoles {
        let made = StatementCountingRoles()
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(8)
        do {
            let schema = Connection.quoteIdentifier(
                try admin.query("SELECT current_schema()")[0].decode(String.self, at: 0))
            for name in names {
                let role = "pgdatakit_fanout_\(suffix)_\(name)"
                let quoted = Connection.quoteIdentifier(role)
                try admin.execute("CREATE ROLE \(quoted) LOGIN")
                made.roles[name] = role
                try admin.execute("GRANT USAGE ON SCHEMA \(schema) TO \(quoted)")
                try admin.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(schema) TO \(quoted)")
                try admin.execute("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA \(schema) TO \(quoted)")
            }
        } catch {
            made.drop(on: admin)
            made.unavailableReason = "no roles of their own could be made (\(error)); they connect as the URL's user"
            return made
        }
        do {
            try admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            _ = try admin.query("SELECT count(*) FROM pg_stat_statements")
            let track = try admin.query("SELECT current_setting('pg_stat_statements.track', true)")[0]
                .decode(String?.self, at: 0)
            if track == "none" { made.unavailableReason = "pg_stat_statements.track = none" }
        } catch {
            made.unavailableReason = "pg_stat_statements is not loaded on this server (\(Self.firstLine(of: error)))"
        }
        return made
    }

    /// `base` logging in as the role of `name` (unchanged when it has none). The bench
    /// server and the throwaway server trust local connections, so no password is needed.
    func configuration(for name: String, base: ConnectionConfiguration) -> ConnectionConfiguration {
        guard let role = roles[name] else { return base }
        var configuration = base
        configuration.overrides["user"] = role
        return configuration
    }

    /// The statements of every role in the connection's database now (empty when they
    /// cannot be counted).
    func snapshot(on admin: Connection) throws -> Snapshot {
        guard unavailableReason == nil, !roles.isEmpty else { return [:] }
        let rows = try admin.query(
            """
            SELECT r.rolname, coalesce(s.queryid, 0), sum(s.calls)::bigint, min(s.query)
              FROM pg_stat_statements AS s JOIN pg_roles AS r ON r.oid = s.userid
             WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND r.rolname = ANY($1)
             GROUP BY 1, 2
            """, [Array(roles.values)])
        var snapshot: Snapshot = [:]
        for row in rows {
            let role = try row.decode(String.self, at: 0)
            snapshot[role, default: [:]][try row.decode(Int64.self, at: 1)] =
                (try row.decode(Int.self, at: 2), try row.decode(String?.self, at: 3) ?? "")
        }
        return snapshot
    }

    /// A snapshot taken once the counts stopped moving: read every 300 ms until two reads
    /// in a row agree (at most `limit`), so that statements still on their way (a
    /// listener reading the last saves) are in it.
    func settledSnapshot(on admin: Connection, limit: Duration = .seconds(15)) throws -> Snapshot {
        var last = try snapshot(on: admin)
        let deadline = ContinuousClock.now + limit
        var steady = 0
        while steady < 2, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.3)
            let next = try snapshot(on: admin)
            steady = Self.total(next) == Self.total(last) ? steady + 1 : 0
            last = next
        }
        return last
    }

    /// The statements the role of `name` sent between two snapshots, most calls first
    /// (`nil` when they cannot be counted).
    func calls(of name: String, from before: Snapshot, to after: Snapshot) -> [(calls: Int, query: String)]? {
        guard unavailableReason == nil, let role = roles[name] else { return nil }
        let earlier = before[role] ?? [:]
        return (after[role] ?? [:]).compactMap { id, entry -> (calls: Int, query: String)? in
            let calls = entry.calls - (earlier[id]?.calls ?? 0)
            return calls > 0 ? (calls, entry.query) : nil
        }.sorted { $0.calls > $1.calls }
    }

    /// Drops the roles: `DROP OWNED BY` (their grants in this database), then `DROP ROLE`.
    /// What cannot be dropped is named on standard error.
    func drop(on admin: Connection) {
        for role in roles.values.sorted() {
            let quoted = Connection.quoteIdentifier(role)
            do {
                try admin.execute("DROP OWNED BY \(quoted)")
                try admin.execute("DROP ROLE IF EXISTS \(quoted)")
            } catch {
                printError("could not drop the role \(role) (drop it by hand: DROP OWNED BY / DROP ROLE): \(error)")
            }
        }
        roles = [:]
    }

    private static func total(_ snapshot: Snapshot) -> Int {
        snapshot.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.calls } }
    }

    private static func firstLine(of error: any Error) -> String {
        String(describing: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
    }
}
