import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

/// A primary and a synchronous streaming standby, started by a test from the installed
/// server binaries: the topology a failover runs on.
///
/// Both live in one temporary folder owned by the server's account (`postgres` when the
/// tests run as root), listen on two free ports of 127.0.0.1 and trust local
/// connections. The primary (an `EmbeddedPostgres`) runs with `wal_level = replica`,
/// `synchronous_commit = on` and `synchronous_standby_names` naming the standby's
/// `application_name`, so a `COMMIT` returns only once the standby has the commit record.
/// The standby is a `pg_basebackup -R` copy (`standby.signal`, `primary_conninfo` with
/// that `application_name`); after a promotion it has no standby of its own, so it runs
/// with `synchronous_standby_names` empty (otherwise every commit on it would wait
/// forever).
///
/// Both keep `EmbeddedPostgres`'s `fsync = off` for speed: `pg_ctl stop -m immediate`
/// ends the processes, not the machine, so what they wrote is in the kernel's cache
/// and survives, and what a failover may lose is decided by replication alone.
///
/// `withTopology` stops both servers and removes the folder afterwards, also when the
/// test fails; a watchdog does the same if the test process is killed.
final class ReplicatedPostgres {
    /// The standby's `application_name`, named by the primary's
    /// `synchronous_standby_names`.
    static let standbyName = "pgdatakit_standby"

    let primary: EmbeddedPostgres
    /// The folder holding both servers.
    let parent: URL
    /// The standby's folder: its data directory, socket and log.
    let standbyDirectory: URL
    let standbyPort: Int
    private let bin: URL
    private let serverUser: String?

    var standbyData: URL { standbyDirectory.appendingPathComponent("data") }
    var standbyLog: URL { standbyDirectory.appendingPathComponent("server.log") }
    var primaryPort: Int { primary.port }

    /// The primary's database `database`, directly.
    func primaryConfiguration(_ database: String) -> ConnectionConfiguration {
        ConnectionConfiguration("postgresql://postgres@127.0.0.1:\(primaryPort)/\(database)")
    }

    /// The standby's database `database`, directly.
    func standbyConfiguration(_ database: String) -> ConnectionConfiguration {
        ConnectionConfiguration("postgresql://postgres@127.0.0.1:\(standbyPort)/\(database)")
    }

    /// What the workers use: both servers in one multi-host URL, and libpq keeps only a
    /// session on the one that accepts writes (the primary, then the promoted standby).
    /// `secondPort` replaces the standby's port (a proxy in front of it).
    func failoverConfiguration(_ database: String, secondPort: Int? = nil) -> ConnectionConfiguration {
        ConnectionConfiguration(
            "postgresql://postgres@127.0.0.1:\(primaryPort),127.0.0.1:\(secondPort ?? standbyPort)/\(database)"
                + "?target_session_attrs=read-write&connect_timeout=2")
    }

    private init(
        primary: EmbeddedPostgres, parent: URL, standbyDirectory: URL, standbyPort: Int, bin: URL, serverUser: String?
    ) {
        self.primary = primary
        self.parent = parent
        self.standbyDirectory = standbyDirectory
        self.standbyPort = standbyPort
        self.bin = bin
        self.serverUser = serverUser
    }

    /// Starts both servers, runs `body`, and tears everything down, even when `body`
    /// throws.
    static func withTopology<T>(_ body: (ReplicatedPostgres) throws -> T) throws -> T {
        let parent = try makeParentDirectory()
        var topology: ReplicatedPostgres?
        defer {
            topology?.tearDown()
            try? FileManager.default.removeItem(at: parent)
        }
        topology = try start(in: parent)
        return try body(try #require(topology))
    }

    private static func makeParentDirectory() throws -> URL {
        var template = Array(
            FileManager.default.temporaryDirectory.appendingPathComponent("pgdatakit-failover-XXXXXX").path.utf8CString)
        guard let created = mkdtemp(&template) else { throw TestFailure("mkdtemp: \(String(cString: strerror(errno)))") }
        let parent = URL(fileURLWithPath: String(cString: created))
        try chownToServerAccount(parent)
        return parent
    }

    private static func chownToServerAccount(_ url: URL) throws {
        guard geteuid() == 0 else { return }
        guard let entry = getpwnam("postgres") else { throw TestFailure("no postgres account to run the servers") }
        guard chown(url.path, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0 else {
            throw TestFailure("chown \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    private static func start(in parent: URL) throws -> ReplicatedPostgres {
        let primary = try EmbeddedPostgres.start(
            EmbeddedPostgres.Options(
                parentDirectory: parent,
                settings: [
                    "wal_level": "replica",
                    "max_wal_senders": "4",
                    "synchronous_commit": "on",
                    "synchronous_standby_names": "'\(standbyName)'",
                    "max_connections": "100",
                    "shared_buffers": "32MB",
                ]))
        var standbyStarted = false
        let standbyDirectory = parent.appendingPathComponent("standby")
        do {
            try FileManager.default.createDirectory(at: standbyDirectory, withIntermediateDirectories: false)
            try chownToServerAccount(standbyDirectory)
            let data = standbyDirectory.appendingPathComponent("data")
            try EmbeddedPostgres.runCommand(
                primary.binDirectory.appendingPathComponent("pg_basebackup"),
                [
                    "-D", data.path, "-R", "-X", "stream", "-c", "fast", "--no-sync",
                    "-d", "host=127.0.0.1 port=\(primary.port) user=postgres application_name=\(standbyName)",
                ],
                as: primary.serverUser, in: standbyDirectory)
            var lastError: (any Error)?
            for _ in 0..<3 {
                let port = try EmbeddedPostgres.freePort()
                // Later lines of postgresql.auto.conf win over the primary's copied ones.
                let settings = """
                    port = \(port)
                    unix_socket_directories = '\(standbyDirectory.path)'
                    hot_standby = on
                    synchronous_standby_names = ''

                    """
                let handle = try FileHandle(forWritingTo: data.appendingPathComponent("postgresql.auto.conf"))
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(settings.utf8))
                try handle.close()
                do {
                    try EmbeddedPostgres.runCommand(
                        primary.binDirectory.appendingPathComponent("pg_ctl"),
                        ["-D", data.path, "-l", standbyDirectory.appendingPathComponent("server.log").path, "-w", "-t", "60", "start"],
                        as: primary.serverUser, in: standbyDirectory)
                    standbyStarted = true
                    let topology = ReplicatedPostgres(
                        primary: primary, parent: parent, standbyDirectory: standbyDirectory, standbyPort: port,
                        bin: primary.binDirectory, serverUser: primary.serverUser)
                    topology.startWatchdog()
                    try topology.waitForSynchronousStandby()
                    return topology
                } catch {
                    lastError = error
                    let log = (try? String(contentsOf: standbyDirectory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
                    if standbyStarted || !log.contains("Address already in use") { break }
                }
            }
            throw lastError ?? TestFailure("the standby did not start")
        } catch {
            if standbyStarted {
                _ = try? EmbeddedPostgres.runCommand(
                    primary.binDirectory.appendingPathComponent("pg_ctl"),
                    ["-D", standbyDirectory.appendingPathComponent("data").path, "-m", "immediate", "-w", "stop"],
                    as: primary.serverUser, in: standbyDirectory)
            }
            try? primary.stop()
            throw error
        }
    }

    /// Waits until the primary reports the standby as its synchronous standby.
    private func waitForSynchronousStandby() throws {
        let connection = try Connection(primaryConfiguration("postgres"))
        defer { connection.close() }
        let start = ContinuousClock.now
        while true {
            let rows = try connection.query(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
                [Self.standbyName])
            if let row = rows.first, try row.decode(String.self, at: 0) == "sync" { return }
            if start.duration(to: .now) > .seconds(30) {
                throw TestFailure("the standby did not become the primary's synchronous standby")
            }
            usleep(20_000)
        }
    }

    /// Stops the primary as a crash would (`pg_ctl stop -m immediate`: every server
    /// process quits at once, no shutdown checkpoint, nothing more sent to the standby).
    func stopPrimaryImmediately(wait: Bool = true) throws {
        try EmbeddedPostgres.runCommand(
            bin.appendingPathComponent("pg_ctl"),
            ["-D", primary.dataDirectory.path, "-m", "immediate", wait ? "-w" : "-W", "-t", "60", "stop"],
            as: serverUser, in: primary.directory)
    }

    /// Stops the primary as `stopPrimaryImmediately` does while its WAL sender is paused
    /// (`SIGSTOP`): whatever the primary wrote since the pause never reaches the standby,
    /// as when a network drops the last packets. The paused sender cannot act on the
    /// shutdown, so it is killed once the postmaster has begun it.
    func stopPrimary(withPausedWALSender walSender: pid_t) throws {
        try stopPrimaryImmediately(wait: false)
        usleep(200_000)
        kill(walSender, SIGKILL)
        let start = ContinuousClock.now
        while primary.postmasterIsAlive() {
            if start.duration(to: .now) > .seconds(30) { throw TestFailure("the primary did not stop") }
            usleep(10_000)
        }
    }

    /// Promotes the standby and waits until it accepts writes.
    func promoteStandby() throws {
        try EmbeddedPostgres.runCommand(
            bin.appendingPathComponent("pg_ctl"), ["-D", standbyData.path, "-w", "-t", "60", "promote"],
            as: serverUser, in: standbyDirectory)
    }

    /// The primary's WAL sender process for the standby.
    func walSenderPID() throws -> pid_t {
        let connection = try Connection(primaryConfiguration("postgres"))
        defer { connection.close() }
        let rows = try connection.query(
            "SELECT pid FROM pg_stat_replication WHERE application_name = $1", [Self.standbyName])
        return try #require(rows.first).decode(Int32.self, at: 0)
    }

    /// Creates `name` on the primary with the example schema and the change log; the
    /// standby has it as soon as this returns (synchronous replication).
    func createDatabase(_ name: String) throws {
        let admin = try Connection(primaryConfiguration("postgres"))
        defer { admin.close() }
        try admin.execute("CREATE DATABASE " + Connection.quoteIdentifier(name))
        let connection = try Connection(primaryConfiguration(name))
        defer { connection.close() }
        try Migrator(directory: TestDatabase.repositoryRoot.appendingPathComponent("migrations")).migrate(on: connection)
    }

    /// Stops both servers (whichever still run) and removes their files.
    func tearDown() {
        if standbyIsAlive() {
            do {
                try EmbeddedPostgres.runCommand(
                    bin.appendingPathComponent("pg_ctl"), ["-D", standbyData.path, "-m", "immediate", "-w", "-t", "60", "stop"],
                    as: serverUser, in: standbyDirectory)
            } catch {
                Issue.record("could not stop the standby: \(error)")
            }
        }
        if primary.postmasterIsAlive() {
            // Not a clean shutdown: a fast one would wait for the standby to take the
            // last WAL, and the standby is gone.
            _ = try? stopPrimaryImmediately()
        }
        do { try primary.stop() } catch { Issue.record("could not stop the primary: \(error)") }
        try? FileManager.default.removeItem(at: parent)
    }

    /// The standby's postmaster's process id, when it runs.
    private func standbyPostmasterPID() -> pid_t? {
        guard let text = try? String(contentsOf: standbyData.appendingPathComponent("postmaster.pid"), encoding: .utf8),
            let first = text.split(separator: "\n").first, let pid = pid_t(first), pid > 0
        else { return nil }
        return kill(pid, 0) == 0 ? pid : nil
    }

    private func standbyIsAlive() -> Bool { standbyPostmasterPID() != nil }

    /// A detached shell that stops the standby and removes the folder once this process
    /// is gone, even if it was killed (the primary has its own watchdog).
    private func startWatchdog() {
        do {
            try EmbeddedPostgres.launchCleanupWatchdog(
                named: "pgdatakit-failover-watchdog", folder: parent, dataDirectory: standbyData)
        } catch {
            Issue.record("could not start the standby's cleanup watchdog: \(error)")
        }
    }
}
