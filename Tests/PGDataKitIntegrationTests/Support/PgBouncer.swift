import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A real PgBouncer in front of the test server, for one test: its ini and user list in a
/// folder of its own (owned by the unprivileged `postgres` account when the tests run as
/// root, since PgBouncer refuses to run as root), listening on a free port of 127.0.0.1.
/// `withPgBouncer` stops it and removes the folder afterwards, even when the test fails;
/// a watchdog does so if the test process dies first.
final class PgBouncer {
    /// The `pgbouncer` binary, if installed (Debian's package puts it in /usr/sbin).
    static var executable: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            + path.split(separator: ":").map { "\($0)/pgbouncer" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Whether a test that needs PgBouncer runs: when it is installed, and always on CI
    /// (which installs it: a missing binary there is a failure, not a skip).
    static var isAvailableOrRequired: Bool {
        executable != nil || ProcessInfo.processInfo.environment["CI"] != nil
    }

    let port: Int
    let directory: URL
    private let pidFile: URL
    var logFile: URL { directory.appendingPathComponent("pgbouncer.log") }

    private init(port: Int, directory: URL) {
        self.port = port
        self.directory = directory
        self.pidFile = directory.appendingPathComponent("pgbouncer.pid")
    }

    /// The same database, user and password as `configuration`, through this PgBouncer.
    func configuration(for configuration: ConnectionConfiguration) -> ConnectionConfiguration {
        var pooled = configuration
        pooled.overrides["host"] = "127.0.0.1"
        pooled.overrides["hostaddr"] = "127.0.0.1"
        pooled.overrides["port"] = String(port)
        return pooled
    }

    /// What PgBouncer logged (for failure messages).
    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// Starts PgBouncer in front of the server `server` points at, runs `body`, stops it.
    ///
    /// - Parameters:
    ///   - poolMode: `transaction` or `session`.
    ///   - poolSize: `default_pool_size`: server connections per database and user.
    static func withPgBouncer<T>(
        server: ConnectionConfiguration, poolMode: String = "transaction", poolSize: Int = 4,
        _ body: (PgBouncer) throws -> T
    ) throws -> T {
        let bouncer = try start(server: server, poolMode: poolMode, poolSize: poolSize)
        defer { bouncer.stop() }
        return try body(bouncer)
    }

    private static func start(server: ConnectionConfiguration, poolMode: String, poolSize: Int) throws -> PgBouncer {
        guard let executable else {
            throw TestFailure("pgbouncer is not installed (apt-get install pgbouncer; .ci/run installs it)")
        }
        let parameters = try #require(server.parameters())
        let serverUser: String? = geteuid() == 0 ? "postgres" : nil
        var template = Array(FileManager.default.temporaryDirectory.appendingPathComponent("pgdatakit-bouncer-XXXXXX").path.utf8CString)
        guard let created = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: \(String(cString: strerror(errno)))") }
        let directory = URL(fileURLWithPath: String(cString: created))
        let bouncer = PgBouncer(port: try EmbeddedPostgres.freePort(), directory: directory)
        do {
            let user = parameters["user"] ?? "postgres"
            // The server's own authentication stays as it is: a password in the test
            // server's configuration goes to PgBouncer's server login, never to a log.
            var target = "host=\(parameters["hostaddr"] ?? parameters["host"] ?? "127.0.0.1") port=\(parameters["port"] ?? "5432")"
            if let password = parameters["password"] { target += " password=\(password)" }
            let ini = """
                [databases]
                * = \(target)

                [pgbouncer]
                listen_addr = 127.0.0.1
                listen_port = \(bouncer.port)
                unix_socket_dir =
                auth_type = trust
                auth_file = \(directory.appendingPathComponent("userlist.txt").path)
                pool_mode = \(poolMode)
                default_pool_size = \(poolSize)
                min_pool_size = 0
                reserve_pool_size = 0
                max_client_conn = 200
                logfile = \(bouncer.logFile.path)
                pidfile = \(bouncer.pidFile.path)
                admin_users = \(user)
                """
            try ini.write(to: directory.appendingPathComponent("pgbouncer.ini"), atomically: true, encoding: .utf8)
            // Clients log in with `trust`: PgBouncer only checks that the name is listed.
            try "\"\(user)\" \"\"\n".write(
                to: directory.appendingPathComponent("userlist.txt"), atomically: true, encoding: .utf8)
            // (The ini may hold the server's password: readable by its owner only.)
            chmod(directory.appendingPathComponent("pgbouncer.ini").path, 0o600)
            if let serverUser, let account = getpwnam(serverUser) {
                for path in [directory.path, directory.appendingPathComponent("pgbouncer.ini").path,
                             directory.appendingPathComponent("userlist.txt").path] {
                    guard chown(path, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                        throw TestFailure("chown \(path): \(String(cString: strerror(errno)))")
                    }
                }
            }
            var command = [executable, "-d", "-q", directory.appendingPathComponent("pgbouncer.ini").path]
            if let serverUser { command = ["/usr/sbin/runuser", "-u", serverUser, "--"] + command }
            let outcome = try ChildProcess.run(
                command[0], Array(command.dropFirst()), in: directory, environment: ProcessInfo.processInfo.environment)
            guard outcome.status == 0 else {
                throw TestFailure("pgbouncer did not start (status \(outcome.status)): \(outcome.output)\n\(bouncer.log)")
            }
            bouncer.startWatchdog()
            try bouncer.waitUntilAccepting(server)
            return bouncer
        } catch {
            bouncer.stop()
            throw error
        }
    }

    private func waitUntilAccepting(_ server: ConnectionConfiguration) throws {
        let start = ContinuousClock.now
        while true {
            do {
                try Connection(configuration(for: server)).close()
                return
            } catch {
                if start.duration(to: .now) > patience {
                    throw TestFailure("pgbouncer does not accept connections: \(error)\n\(log)")
                }
                usleep(50_000)
            }
        }
    }

    /// The process id in PgBouncer's pid file, while it runs.
    private var pid: pid_t? {
        (try? String(contentsOf: pidFile, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Stops PgBouncer (SIGTERM: immediate shutdown) and removes its folder.
    func stop() {
        if let pid {
            kill(pid, SIGTERM)
            let start = ContinuousClock.now
            while kill(pid, 0) == 0, start.duration(to: .now) < patience { usleep(20_000) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// A detached shell that stops PgBouncer once the test process is gone, if the test
    /// could not (its pid file is gone once `stop()` ran).
    private func startWatchdog() {
        let script = """
            trap '' INT TERM HUP
            while kill -0 "$1" 2>/dev/null; do sleep 1; done
            if [ -f "$2/pgbouncer.pid" ]; then kill -TERM "$(cat "$2/pgbouncer.pid")" 2>/dev/null; sleep 1; fi
            rm -rf "$2"
            """
        try? ChildProcess.launchDetached(
            "/bin/sh", ["-c", script, "pgdatakit-bouncer-watchdog", String(getpid()), directory.path],
            in: URL(fileURLWithPath: "/"))
    }
}
