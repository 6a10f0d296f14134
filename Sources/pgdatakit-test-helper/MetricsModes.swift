import Foundation
import MetricsTestKit
import PGDataKit

/// `metrics`: runs each kind of work PGDataKit counts once, against a swift-metrics test
/// backend bootstrapped before any coordinator was made, and prints the counters as
/// JSON (`label|dimension=value,…` → total) and the timers as counts of values.
func metricsRun(_ metrics: TestMetrics, url: String) throws {
    let configuration = ConnectionConfiguration(url)
    let manager = try ContextManager(configuration: configuration, entities: [HelperUser.self])
    _ = manager.mainContext  // read, so that saves are merged into it (counted below)
    defer { manager.close() }
    manager.coordinator.contentionWindow = .zero  // every redo below happens (`contentionWindow`)
    let context = manager.newPrivateContext()  // a save of three new users
    try context.performAndWait {
        for index in 0..<3 { HelperUser(context: context).userID = "metrics-\(index)" }
        try context.save()
    }
    // A conflict settled by the merge policy: the save is redone once.
    let first = manager.newPrivateContext()
    let second = manager.newPrivateContext()
    second.mergePolicy = .mergeByPropertyObjectTrump
    try second.performAndWait {
        for user in try HelperUser.fetch(in: second, where: "userID == %@", "metrics-0") { user.name = "second" }
    }
    try first.performAndWait {
        for user in try HelperUser.fetch(in: first, where: "userID == %@", "metrics-0") { user.name = "first" }
        try first.save()
    }
    try second.performAndWait { try second.save() }
    // An import of ten records.
    let records: [JSONValue] = (0..<10).map { .object(["UserID": .string("imported-\($0)")]) }
    let mapper = ObjectMapper<HelperUser>(uniqueKey: \.userID, remoteKey: "UserID") { _, _ in }
    let operation = manager.importOperation(records, mapper: mapper)
    operation.start()
    if let error = operation.error { throw error }
    // A save that waits for a lock another session holds, past the lock timeout.
    var impatient = configuration
    impatient.lockTimeout = .milliseconds(200)
    let waiter = try ContextManager(configuration: impatient, entities: [HelperUser.self])
    defer { waiter.close() }
    let holder = try Connection(configuration)
    defer { holder.close() }
    try holder.execute("BEGIN")
    try holder.execute("SELECT 1 FROM users WHERE user_id = 'metrics-1' FOR UPDATE")
    let blocked = waiter.newPrivateContext()
    let timedOut = blocked.performAndWait { () -> Bool in
        do {
            for user in try HelperUser.fetch(in: blocked, where: "userID == %@", "metrics-1") { user.name = "waited" }
            try blocked.save()
            return false
        } catch let error as PostgresError {
            return error.sqlState == .lockNotAvailable && error.isTransient
        } catch {
            return false
        }
    }
    try holder.execute("ROLLBACK")
    try importMeetingAHeldRow(manager, holder: holder)
    // Another coordinator's save, merged into this manager's main context.
    let other = waiter.newPrivateContext()
    try other.performAndWait {
        HelperUser(context: other).userID = "from-another-coordinator"
        try other.save()
    }
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline, (try? metrics.expectCounter(PGDataKitMetrics.merges).totalValue) == nil {
        Thread.sleep(forTimeInterval: 0.01)
    }
    var counters: [String: Int64] = [:]
    for counter in metrics.counters {
        let dimensions = counter.dimensions.map { "\($0.0)=\($0.1)" }.sorted().joined(separator: ",")
        counters[counter.label + "|" + dimensions, default: 0] += counter.totalValue
    }
    var timers: [String: Int] = [:]
    for label in [PGDataKitMetrics.listenerLag, PGDataKitMetrics.mergeLatency] {
        timers[label] = (try? metrics.expectTimer(label).values.count) ?? 0
    }
    let report: [String: JSONValue] = [
        "counters": .object(counters.mapValues { .number(Double($0)) }),
        "timers": .object(timers.mapValues { .number(Double($0)) }),
        "lockTimeoutThrown": .bool(timedOut),
        "pool": try poolMetricsRun(metrics, configuration: configuration),
        "statements": try statementMetricsRun(metrics, configuration: configuration),
    ]
    emit(JSONValue.object(report).jsonText)
}

/// An import whose key another session committed since it looked, and holds: the save is
/// redone, locking that row in order (waiting for it) before its new keys.
func importMeetingAHeldRow(_ manager: ContextManager, holder: Connection) throws {
    let importer = manager.newPrivateContext()
    importer.isolationLevel = .readCommitted
    importer.mergePolicy = .mergeByPropertyObjectTrump
    try importer.performAndWait {
        _ = try HelperUser.insertOrUpdate(
            [.object(["UserID": "held"])], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: importer
        ) { _, user in user.name = "imported" }
    }
    try holder.execute("INSERT INTO users (user_id) VALUES ('held')")
    try holder.execute("BEGIN")
    try holder.execute("SELECT 1 FROM users WHERE user_id = 'held' FOR NO KEY UPDATE")
    let importing = DispatchGroup()
    importing.enter()
    DispatchQueue.global().async {
        defer { importing.leave() }
        do { try importer.performAndWait { try importer.save() } } catch { fail("the held-row import failed: \(error)") }
    }
    let waitDeadline = Date().addingTimeInterval(10)
    while Date() < waitDeadline {
        let waiting = try holder.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
        if try waiting[0].decode(Int.self, at: 0) > 0 { break }
        Thread.sleep(forTimeInterval: 0.005)
    }
    try holder.execute("ROLLBACK")
    importing.wait()
}

/// A pool of one: one connection lent, a second borrower waits at least 50 ms, then is
/// served. Reports the pool's gauges (peak and last) and its longest wait.
func poolMetricsRun(_ metrics: TestMetrics, configuration: ConnectionConfiguration) throws -> JSONValue {
    let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
    defer { pool.close() }
    let lent = try pool.acquire()
    let served = DispatchGroup()
    served.enter()
    DispatchQueue.global().async {
        if let connection = try? pool.acquire(timeout: .seconds(10)) { pool.release(connection) }
        served.leave()
    }
    let deadline = Date().addingTimeInterval(10)
    while pool.waiting == 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
    Thread.sleep(forTimeInterval: 0.05)
    pool.release(lent)
    served.wait()
    let connections = ConnectionPoolMetrics.connections
    let inUse = try metrics.expectRecorder(connections, [("state", "in_use")])
    let idle = try metrics.expectRecorder(connections, [("state", "idle")])
    let waiters = try metrics.expectRecorder(ConnectionPoolMetrics.waiters)
    let waits = try metrics.expectTimer(ConnectionPoolMetrics.waitTime)
    return .object([
        "inUsePeak": .number(inUse.values.max() ?? -1),
        "idleLast": .number(idle.lastValue ?? -1),
        "waitersPeak": .number(waiters.values.max() ?? -1),
        "waitersLast": .number(waiters.lastValue ?? -1),
        "longestWaitMs": .number(Double(waits.values.max() ?? -1) / 1e6),
    ])
}

/// A statement that sleeps 50 ms on a connection of its own, after the work above:
/// reports how many round trips of each kind were timed and the longest statement.
func statementMetricsRun(_ metrics: TestMetrics, configuration: ConnectionConfiguration) throws -> JSONValue {
    let connection = try Connection(configuration)
    defer { connection.close() }
    try connection.execute("SELECT pg_sleep(0.05)")
    var report: [String: JSONValue] = [:]
    for kind in ["statement", "pipeline", "copy"] {
        let timer = try? metrics.expectTimer(PGDataKitMetrics.statementTime, [("kind", kind)])
        report[kind] = .number(Double(timer?.values.count ?? 0))
        if kind == "statement" { report["longestStatementMs"] = .number(Double(timer?.values.max() ?? -1) / 1e6) }
    }
    return .object(report)
}
