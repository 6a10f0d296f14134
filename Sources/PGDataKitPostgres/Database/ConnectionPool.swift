import Foundation
import Logging

/// A bounded set of connections to one database, shared by threads.
///
/// `withConnection(_:)` borrows a connection for the length of a closure. When all are
/// busy the caller waits, up to `acquireTimeout`, then gets a `ConnectionPoolError`
/// rather than hanging. Broken connections (server restarted, backend terminated) are
/// dropped and replaced; a connection returned inside a transaction is rolled back
/// first, so nobody ever receives one mid-transaction.
///
/// For example:
///
/// ```swift
/// let pool = ConnectionPool(
///     configuration: ConnectionConfiguration(url), maximumConnections: 8)
/// let names = try pool.withConnection { connection in
///     try connection.query("SELECT name FROM users").map { try $0.decode(String.self, at: 0) }
/// }
/// ```
public final class ConnectionPool: @unchecked Sendable {
    // Safe to share: all mutable state (`idle`, `openCount`, `isClosed`) is read and
    // written only while holding `condition`.
    private let condition = NSCondition()
    private var idle: [Connection] = []
    private var openCount = 0
    private var isClosed = false
    /// Where the pool's connections go.
    public let configuration: ConnectionConfiguration
    /// The most connections the pool opens at once.
    public let maximumConnections: Int
    /// How long `acquire` waits for a free connection by default.
    public let acquireTimeout: Duration
    private let logger: Logger

    /// Creates a pool; connections open lazily, on first demand.
    ///
    /// - Parameters:
    ///   - configuration: where to connect.
    ///   - maximumConnections: the upper bound on open connections (at least 1).
    ///   - acquireTimeout: how long to wait when all connections are busy.
    ///   - logger: where the pool logs (label `pgdatakit.pool` by default).
    public init(
        configuration: ConnectionConfiguration, maximumConnections: Int = 10,
        acquireTimeout: Duration = .seconds(10),
        logger: Logger = Logger(label: "pgdatakit.pool")
    ) {
        self.configuration = configuration
        self.maximumConnections = max(1, maximumConnections)
        self.acquireTimeout = acquireTimeout
        self.logger = logger
    }

    deinit { close() }

    /// Borrows a connection for `body` and returns it afterwards, even when `body`
    /// throws.
    ///
    /// - Throws: `ConnectionPoolError` when none frees up in time, `PostgresError` when
    ///   a new connection cannot be opened, or whatever `body` throws.
    public func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    /// Takes a connection out of the pool; give it back with `release(_:)`.
    ///
    /// - Parameter timeout: how long to wait for a free one (`acquireTimeout` if `nil`).
    /// - Throws: `ConnectionPoolError` or `PostgresError`.
    public func acquire(timeout: Duration? = nil) throws -> Connection {
        let waited = timeout ?? acquireTimeout
        let deadline = Date().addingTimeInterval(
            Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18)
        while true {
            condition.lock()
            if isClosed {
                condition.unlock()
                throw ConnectionPoolError.closed
            }
            if let connection = idle.popLast() {
                condition.unlock()
                if connection.isUsable, connection.transactionStatus == .idle {
                    return connection
                }
                logger.debug("dropping a broken pooled connection", metadata: ["server": "\(configuration)"])
                discard(connection)
                continue
            }
            if openCount < maximumConnections {
                openCount += 1
                condition.unlock()
                do {
                    return try Connection(configuration, logger: logger)
                } catch {
                    condition.lock()
                    openCount -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            let signalled = condition.wait(until: deadline)
            condition.unlock()
            if !signalled && Date() >= deadline {
                throw ConnectionPoolError.timedOut(waited: waited, maximumConnections: maximumConnections)
            }
        }
    }

    /// Gives a connection back. One still inside a transaction is rolled back; one that
    /// is broken is closed and its place freed for a new one.
    public func release(_ connection: Connection) {
        var healthy = !connection.isClosed
        if healthy, connection.transactionStatus != .idle {
            do {
                try connection.rollback()
            } catch {
                healthy = false
            }
            healthy = healthy && connection.transactionStatus == .idle
        }
        guard healthy, connection.isUsable else {
            discard(connection)
            return
        }
        condition.lock()
        if isClosed {
            condition.unlock()
            discard(connection)
            return
        }
        idle.append(connection)
        condition.signal()
        condition.unlock()
    }

    private func discard(_ connection: Connection) {
        connection.close()
        condition.lock()
        openCount -= 1
        condition.signal()
        condition.unlock()
    }

    /// Closes idle connections and refuses new borrowing; borrowed connections are
    /// closed when they come back.
    public func close() {
        condition.lock()
        isClosed = true
        let connections = idle
        idle.removeAll()
        openCount -= connections.count
        condition.broadcast()
        condition.unlock()
        connections.forEach { $0.close() }
    }

    /// How many connections are open, and how many of those are idle.
    public var statistics: (open: Int, idle: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (openCount, idle.count)
    }
}
