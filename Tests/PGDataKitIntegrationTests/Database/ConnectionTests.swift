import Foundation
import PGDataKit
import Testing

@Suite("Connection: statements, errors, transactions, notifications, COPY")
struct ConnectionTests {
    @Test func injectionAttemptStaysData() throws {
        try TestDatabase.withConnection(migrations: true) { connection in
            let evil = "'; DROP TABLE users; --"
            try connection.execute("INSERT INTO users (user_id, name) VALUES ($1, $2)", [evil, evil])
            let rows = try connection.query("SELECT user_id, name FROM users WHERE user_id = $1", [evil])
            #expect(rows.count == 1)
            #expect(try rows[0].decode(String.self, named: "name") == evil)
            // The table is still there.
            #expect(try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 1)
        }
    }

    /// Column names as the server sends them: short ASCII names (written inline), longer
    /// ones, and names outside ASCII, each found by name.
    @Test func columnNamesOfEveryLengthAndScriptReadBack() throws {
        try TestDatabase.withConnection { connection in
            let names = ["a", "fifteen_bytes_x", "sixteen_bytes_xy", "naïve", "東京", "🚀 launch", String(repeating: "n", count: 63)]
            let list = names.enumerated().map { "\($0.offset) AS \(Connection.quoteIdentifier($0.element))" }
            let result = try connection.query("SELECT " + list.joined(separator: ", "))
            #expect(result.columns == names)
            for (index, name) in names.enumerated() {
                #expect(result.columnIndex(named: name) == index)
                #expect(try result[0].decode(Int.self, named: name) == index)
            }
        }
    }

    @Test func quotedIdentifiersAcceptAnyName() throws {
        try TestDatabase.withConnection { connection in
            let table = "we\"ird; DROP TABLE x; --"
            let column = "Mixed Case \"col\""
            try connection.execute(
                "CREATE TABLE \(Connection.quoteIdentifier(table)) (\(Connection.quoteIdentifier(column)) int)")
            try connection.execute(
                "INSERT INTO \(Connection.quoteIdentifier(table)) VALUES ($1)", [7])
            let result = try connection.query("SELECT * FROM \(Connection.quoteIdentifier(table))")
            #expect(result.columns == [column])
            #expect(try result[0].decode(Int.self, named: column) == 7)
        }
    }

    @Test func statementErrorIsTypedAndNamesTheStatement() throws {
        try TestDatabase.withConnection { connection in
            do {
                try connection.execute("SELEC 1")
                Issue.record("expected a syntax error")
            } catch let error as PostgresError {
                #expect(error.kind == .server)
                #expect(error.sqlState == .syntaxError)
                #expect(error.statement == "SELEC 1")
                #expect(error.description.contains("42601"))
                #expect(error.description.contains("SELEC 1"))
            }
            do {
                try connection.execute("SELECT * FROM no_such_table WHERE a = $1", ["secret-value"])
                Issue.record("expected an error")
            } catch let error as PostgresError {
                #expect(error.sqlState == .undefinedTable)
                #expect(error.position == 15)  // where "no_such_table" starts, in characters
                #expect(!error.description.contains("secret-value"))
                #expect(error.debugDescription.contains("secret-value"))
            }
            // The connection is still usable.
            #expect(try connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        }
    }

    /// A server error's detail and some messages quote row data: a unique key, a whole
    /// failing row, a value that did not parse. `description` withholds them (they are in
    /// `detail`, `message` and `debugDescription`).
    @Test func serverErrorDescriptionsWithholdRowData() throws {
        try TestDatabase.withConnection { connection in
            try connection.execute("CREATE TABLE t (k text UNIQUE, n integer CHECK (n > 0))")
            try connection.execute("INSERT INTO t VALUES ($1, 1)", ["secret-key"])
            let cases: [(String, [(any PostgresEncodable)?], SQLState)] = [
                ("INSERT INTO t VALUES ($1, 1)", ["secret-key"], .uniqueViolation),
                ("INSERT INTO t VALUES ($1, -5)", ["secret-row"], .checkViolation),
                ("SELECT $1::integer", ["secret-number"], .invalidTextRepresentation),
            ]
            for (sql, parameters, state) in cases {
                do {
                    try connection.execute(sql, parameters)
                    Issue.record("expected \(state) from \(sql)")
                } catch let error as PostgresError {
                    #expect(error.sqlState == state)
                    #expect(!error.description.contains("secret"), "\(error.description)")
                    #expect(error.description.contains(sql))
                    #expect(error.debugDescription.contains("secret"))
                    #expect((error.detail ?? "").contains("secret") || error.message.contains("secret"))
                }
            }
        }
    }

    @Test func failedTransactionIsRolledBack() throws {
        try TestDatabase.withConnection(migrations: true) { connection in
            try connection.execute("INSERT INTO users (user_id) VALUES ('existing')")
            do {
                try connection.transaction { connection in
                    try connection.execute("INSERT INTO users (user_id) VALUES ('new-1')")
                    try connection.execute("INSERT INTO users (user_id) VALUES ('existing')")
                }
                Issue.record("expected a unique violation")
            } catch let error as PostgresError {
                #expect(error.sqlState == .uniqueViolation)
                #expect(error.constraint == "users_user_id_key")
                #expect(error.detail?.contains("existing") == true)
            }
            #expect(connection.transactionStatus == .idle)
            let ids = try connection.query("SELECT user_id FROM users").map { try $0.decode(String.self, at: 0) }
            #expect(ids == ["existing"])
        }
    }

    @Test func commitOfAFailedTransactionThrows() throws {
        try TestDatabase.withConnection { connection in
            try connection.begin()
            #expect(throws: PostgresError.self) { try connection.execute("SELECT 1/0") }
            do {
                try connection.commit()
                Issue.record("COMMIT of a failed transaction must not look like success")
            } catch let error as PostgresError {
                #expect(error.sqlState == .inFailedTransaction)
            }
            #expect(connection.transactionStatus == .idle)
        }
    }

    @Test func transactionIsolationLevelIsApplied() throws {
        try TestDatabase.withConnection { connection in
            for level in IsolationLevel.allCases {
                let shown = try connection.transaction(isolation: level) { connection in
                    try connection.query("SHOW transaction_isolation")[0].decode(String.self, at: 0)
                }
                #expect(shown.uppercased() == level.rawValue)
            }
        }
    }

    @Test func repeatableReadKeepsItsSnapshot() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let reader = try Connection(configuration)
            let writer = try Connection(configuration)
            try reader.begin(isolation: .repeatableRead)
            #expect(try reader.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 0)
            try writer.execute("INSERT INTO users (user_id) VALUES ('u1')")
            #expect(try reader.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 0)
            try reader.commit()
            #expect(try reader.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test func closedPortGivesAConnectionError() throws {
        let port = try closedPort()
        do {
            _ = try Connection(url: "postgresql://alice:s3cr3t-pw@127.0.0.1:\(port)/inventory?connect_timeout=5")
            Issue.record("expected a connection failure")
        } catch let error as PostgresError {
            #expect(error.kind == .connectionFailed)
            #expect(error.connectionFailureReason == .connectionRefused)
            #expect(error.endpoint?.port == String(port))
            #expect(error.endpoint?.database == "inventory")
            #expect(error.description.contains("127.0.0.1:\(port)/inventory"))
            #expect(!error.description.contains("s3cr3t-pw"))
            #expect(!error.debugDescription.contains("s3cr3t-pw"))
        }
    }

    @Test func missingDatabaseGivesAConnectionError() throws {
        let configuration = try TestDatabase.serverConfiguration().database("no_such_database_here")
        do {
            _ = try Connection(configuration)
            Issue.record("expected a connection failure")
        } catch let error as PostgresError {
            #expect(error.kind == .connectionFailed)
            #expect(error.connectionFailureReason == .databaseDoesNotExist)
            #expect(error.sqlState == .invalidCatalogName)
            #expect(error.description.contains("no_such_database_here"))
        }
    }

    @Test func closedConnectionThrowsInsteadOfCrashing() throws {
        try TestDatabase.withConnection { connection in
            connection.close()
            connection.close()
            do {
                try connection.execute("SELECT 1")
                Issue.record("expected an error")
            } catch let error as PostgresError {
                #expect(error.kind == .connectionClosed)
            }
        }
    }

    @Test func terminatedBackendIsAConnectionLostError() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let victim = try Connection(configuration)
            let admin = try Connection(configuration)
            try admin.execute("SELECT pg_terminate_backend($1)", [victim.backendPID])
            try waitUntilGone(pid: victim.backendPID, admin: admin)
            do {
                try victim.execute("SELECT 1")
                Issue.record("expected a lost connection")
            } catch let error as PostgresError {
                #expect(error.kind == .connectionLost)
                #expect(error.isConnectionError)
            }
            #expect(!victim.isUsable)
            try victim.reconnect()
            #expect(try victim.query("SELECT 2")[0].decode(Int.self, at: 0) == 2)
        }
    }

    @Test func oneConnectionServesManyThreadsOneAtATime() throws {
        try TestDatabase.withConnection { connection in
            try onThreads(8) { thread in
                for step in 0..<50 {
                    let value = thread * 1000 + step
                    let back = try connection.query("SELECT $1::bigint + 0", [value])[0].decode(Int.self, at: 0)
                    guard back == value else { throw TestFailure("got \(back) for \(value)") }
                }
            }
            #expect(connection.statementCount >= 400)
        }
    }

    @Test func transactionHoldsTheConnectionAgainstOtherThreads() throws {
        try TestDatabase.withConnection(migrations: true) { connection in
            // Each thread's transaction inserts two rows; if another thread's statement
            // slipped into it, a rollback would remove foreign rows and counts would be off.
            try onThreads(4) { thread in
                for step in 0..<20 {
                    do {
                        try connection.transaction { connection in
                            try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["t\(thread)-\(step)-a"])
                            try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["t\(thread)-\(step)-b"])
                            if step % 2 == 1 { throw TestFailure("roll back") }
                        }
                    } catch is TestFailure {}
                }
            }
            #expect(try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 4 * 10 * 2)
        }
    }

    @Test func notificationArrivesOnAnotherConnection() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let listener = try Connection(configuration)
            let sender = try Connection(configuration)
            let channel = "changes \"quoted\""
            try listener.listen(channel)
            #expect(try listener.waitForNotification(timeout: .milliseconds(50)) == nil)
            try sender.notify(channel, payload: "42")
            let notification = try #require(try listener.waitForNotification(timeout: .seconds(5)))
            #expect(notification.channel == channel)
            #expect(notification.payload == "42")
            #expect(notification.senderPID == sender.backendPID)

            // Inside a transaction: delivered at commit, not before.
            try sender.transaction { sender in
                try sender.notify(channel, payload: "in-transaction")
                #expect(try listener.waitForNotification(timeout: .milliseconds(100)) == nil)
            }
            #expect(try listener.waitForNotification(timeout: .seconds(5))?.payload == "in-transaction")

            try listener.unlisten(channel)
            try sender.notify(channel, payload: "ignored")
            #expect(try listener.waitForNotification(timeout: .milliseconds(100)) == nil)
        }
    }

    /// `readNotifications()` (the relay's read after its own poll found the socket
    /// readable) reads without waiting: nothing when nothing arrived, every notification
    /// that did, and a session the server ended as lost.
    @Test func notificationsAreReadWithoutWaiting() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let listener = try Connection(configuration)
            let sender = try Connection(configuration)
            try listener.listen("read")
            let started = ContinuousClock.now
            #expect(try listener.readNotifications().isEmpty)
            #expect(ContinuousClock.now - started < .seconds(5))
            try sender.transaction { sender in
                for payload in ["a", "b", "c"] { try sender.notify("read", payload: payload) }
            }
            var payloads: [String] = []
            let deadline = ContinuousClock.now + .seconds(10)
            while payloads.count < 3, ContinuousClock.now < deadline {
                payloads += try listener.readNotifications().map(\.payload)
                if payloads.count < 3 { Thread.sleep(forTimeInterval: 0.01) }
            }
            #expect(payloads == ["a", "b", "c"])
            try sender.execute("SELECT pg_terminate_backend($1)", [listener.backendPID])
            let lost = ContinuousClock.now + .seconds(10)
            var error: PostgresError?
            while error == nil, ContinuousClock.now < lost {
                do {
                    _ = try listener.readNotifications()
                    Thread.sleep(forTimeInterval: 0.01)
                } catch let thrown as PostgresError {
                    error = thrown
                }
            }
            #expect(error?.kind == .connectionLost)
        }
    }

    @Test func waitingTimesOutInTime() throws {
        try TestDatabase.withConnection { connection in
            try connection.listen("quiet")
            let started = ContinuousClock.now
            #expect(try connection.waitForNotification(timeout: .milliseconds(200)) == nil)
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(190))
            // Not "about 200 ms": a loaded machine stretches that. A wait that ignored its
            // timeout would never end (nothing is sent on the channel).
            #expect(elapsed < .seconds(30))
        }
    }

    @Test func oversizedPayloadIsAServerError() throws {
        try TestDatabase.withConnection { connection in
            #expect(throws: PostgresError.self) {
                try connection.notify("big", payload: String(repeating: "x", count: 9000))
            }
        }
    }

    @Test func copyLoadsAwkwardValues() throws {
        try TestDatabase.withConnection { connection in
            try connection.execute("CREATE TABLE loaded (id bigint, label text, blob bytea, at timestamptz)")
            let labels = ["tab\there", "new\nline", "back\\slash", "\\N", "ünï 🚀", "", "carriage\rreturn"]
            let at = Date(timeIntervalSince1970: 1_700_000_000.25)
            let rows: [[(any PostgresEncodable)?]] = (0..<10_000).map { index in
                [index, index % 8 == 7 ? nil : labels[index % labels.count], Data([UInt8(index % 256), 0]), at]
            }
            let loaded = try connection.copy(into: "loaded", columns: ["id", "label", "blob", "at"], rows: rows)
            #expect(loaded == 10_000)
            let result = try connection.query("SELECT id, label, blob, at FROM loaded ORDER BY id")
            #expect(result.count == 10_000)
            for row in result.prefix(64) {
                let id = try row.decode(Int.self, at: 0)
                let expected: String? = id % 8 == 7 ? nil : labels[id % labels.count]
                #expect(try row.decode(String?.self, at: 1) == expected)
                #expect(try row.decode(Data.self, at: 2) == Data([UInt8(id % 256), 0]))
                #expect(try row.decode(Date.self, at: 3) == at)
            }
        }
    }

    @Test func copyWithABadValueLoadsNothing() throws {
        try TestDatabase.withConnection { connection in
            try connection.execute("CREATE TABLE numbers (n integer)")
            let rows: [[(any PostgresEncodable)?]] = [[1], [2], ["not a number"], [4]]
            do {
                try connection.copy(into: "numbers", columns: ["n"], rows: rows)
                Issue.record("expected an error")
            } catch let error as PostgresError {
                #expect(error.sqlState == .invalidTextRepresentation)
            }
            #expect(try connection.query("SELECT count(*) FROM numbers")[0].decode(Int.self, at: 0) == 0)
            // The connection is usable afterwards.
            try connection.copy(into: "numbers", columns: ["n"], rows: [[5]] as [[(any PostgresEncodable)?]])
            #expect(try connection.query("SELECT sum(n) FROM numbers")[0].decode(Int.self, at: 0) == 5)
        }
    }

    @Test func copyWithAWrongRowWidthAbortsCleanly() throws {
        try TestDatabase.withConnection { connection in
            try connection.execute("CREATE TABLE pairs (a int, b int)")
            let rows: [[(any PostgresEncodable)?]] = [[1, 2], [3]]
            #expect(throws: PostgresValueError.self) {
                try connection.copy(into: "pairs", columns: ["a", "b"], rows: rows)
            }
            #expect(try connection.query("SELECT count(*) FROM pairs")[0].decode(Int.self, at: 0) == 0)
        }
    }
}

/// A failure raised by test code itself.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A TCP port on 127.0.0.1 that nothing listens on.
func closedPort() throws -> Int {
    // Bind to find a free port, then let it go: nothing else is listening there.
    let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socketDescriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socketDescriptor, $0, length) == 0 && getsockname(socketDescriptor, $0, &length) == 0
        }
    }
    guard ok else { throw TestFailure("could not find a free port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits until a terminated server process has left `pg_stat_activity`.
func waitUntilGone(pid: Int32, admin: Connection) throws {
    for _ in 0..<200 {
        let rows = try admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])
        if rows.isEmpty { return }
        Thread.sleep(forTimeInterval: 0.01)
    }
    throw TestFailure("backend \(pid) did not go away")
}
