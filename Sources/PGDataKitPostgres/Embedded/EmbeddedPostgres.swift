import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL server in a temporary folder, started from the installed
/// server binaries.
///
/// The tests and the `pgdatakit` CLI use one whenever `DATABASE_URL` is not set. The
/// server listens on 127.0.0.1 on a free port with `trust` authentication for the
/// `postgres` superuser, and by default favours speed over durability (`fsync = off`):
/// it is for tests and trials, never for data you want to keep. A server that outlives
/// its process (`pgdatakit db`) asks for `Options.syncsToDisk` and, if its postmaster
/// dies, is started again on its own data with `restart(port:)`. When the process runs
/// as root, the server runs as the unprivileged `postgres` account (PostgreSQL refuses
/// root).
///
/// `stop()` shuts it down and deletes the folder; so does normal process exit, and a
/// small watchdog does the same if the process dies abruptly (unless
/// `Options.keepsRunningAfterExit`).
///
/// For example:
///
/// ```swift
/// let server = try EmbeddedPostgres.start()
/// defer { try? server.stop() }
/// let connection = try Connection(url: server.url)
/// ```
public final class EmbeddedPostgres: @unchecked Sendable {
    // Safe to share: the only mutable state, `stopped` and `address`, sits in Mutexes;
    // the rest is immutable after start.
    /// Settings for a new server.
    public struct Options: Sendable {
        /// The TCP port; `nil` picks a free one.
        public var port: Int?
        /// Where the temporary folder goes (the system temporary folder by default).
        public var parentDirectory: URL?
        /// Keep the server running after this process exits (for `pgdatakit db start`).
        public var keepsRunningAfterExit: Bool
        /// Keep PostgreSQL's durable defaults — `fsync`, `synchronous_commit` and
        /// `full_page_writes` on, and `initdb` syncing its files — so that a committed
        /// transaction survives a crash of the server or of the machine. Off by default:
        /// a throwaway server favours speed. `pgdatakit db start` turns it on, since its
        /// server outlives the command.
        public var syncsToDisk: Bool
        /// The account that runs the server when this process is root.
        public var unprivilegedUser: String
        /// Extra `postgresql.conf` settings, such as `["max_connections": "300"]`.
        public var settings: [String: String]

        /// The defaults: a free port, the system temporary folder, stopped at exit, no
        /// syncing to disk, run as `postgres` when root.
        public init(
            port: Int? = nil, parentDirectory: URL? = nil, keepsRunningAfterExit: Bool = false,
            syncsToDisk: Bool = false, unprivilegedUser: String = "postgres",
            settings: [String: String] = [:]
        ) {
            self.port = port
            self.parentDirectory = parentDirectory
            self.keepsRunningAfterExit = keepsRunningAfterExit
            self.syncsToDisk = syncsToDisk
            self.unprivilegedUser = unprivilegedUser
            self.settings = settings
        }
    }

    /// Where the server listens; changes only when `restart(port:)` has to move it to
    /// another port.
    struct Address: Sendable {
        var url: String
        var port: Int

        init(url: String, port: Int) {
            self.url = url
            self.port = port
        }

        init(port: Int) {
            self.init(url: "postgresql://postgres@127.0.0.1:\(port)/postgres", port: port)
        }
    }

    /// The URL of the server's `postgres` database as the `postgres` superuser.
    ///
    /// It stays the same for the life of the server, except when `restart(port:)` finds
    /// the old port taken and starts the server on another one.
    public var url: String { address.withLock { $0.url } }
    /// The TCP port on 127.0.0.1 (see `url` for when it changes).
    public var port: Int { address.withLock { $0.port } }
    /// The temporary folder holding the data directory, socket and log.
    public let directory: URL
    /// The folder of the server binaries used.
    public let binDirectory: URL
    let serverUser: String?
    let address: Mutex<Address>
    private let stopped = Mutex(false)
    static let logger = Logger(label: "pgdatakit.embedded")

    private init(address: Address, directory: URL, binDirectory: URL, serverUser: String?) {
        self.address = Mutex(address)
        self.directory = directory
        self.binDirectory = binDirectory
        self.serverUser = serverUser
    }

    var dataDirectory: URL { directory.appendingPathComponent("data") }
    var logFile: URL { directory.appendingPathComponent("server.log") }

    /// Starts a new server and waits until it accepts connections.
    ///
    /// - Throws: `EmbeddedPostgresError` when the binaries are missing (naming the package
    ///   to install), when no unprivileged account exists for a root process, or when
    ///   `initdb` / `pg_ctl` fail (with their output).
    public static func start(_ options: Options = Options()) throws -> EmbeddedPostgres {
        let bin = try locateBinaries()
        let serverUser: String? = geteuid() == 0 ? options.unprivilegedUser : nil
        var account: (uid: uid_t, gid: gid_t)?
        if let serverUser {
            guard let entry = getpwnam(serverUser) else {
                throw EmbeddedPostgresError.noUnprivilegedUser(serverUser)
            }
            account = (entry.pointee.pw_uid, entry.pointee.pw_gid)
        }
        let parent = options.parentDirectory ?? FileManager.default.temporaryDirectory
        var template = Array(parent.appendingPathComponent("pgdatakit-XXXXXX").path.utf8CString)
        guard let created = mkdtemp(&template) else {
            throw EmbeddedPostgresError.fileSystem("mkdtemp in \(parent.path): \(String(cString: strerror(errno)))")
        }
        let directory = URL(fileURLWithPath: String(cString: created))
        do {
            if let account, chown(directory.path, account.uid, account.gid) != 0 {
                throw EmbeddedPostgresError.fileSystem("chown \(directory.path): \(String(cString: strerror(errno)))")
            }
            let server = try initialise(
                directory: directory, bin: bin, serverUser: serverUser, options: options)
            if !options.keepsRunningAfterExit {
                Registry.add(server)
                server.startWatchdog()
            }
            logger.debug("started", metadata: ["url": "\(server.url)", "directory": "\(directory.path)"])
            return server
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private static func initialise(
        directory: URL, bin: URL, serverUser: String?, options: Options
    ) throws -> EmbeddedPostgres {
        let data = directory.appendingPathComponent("data")
        try runCommand(
            bin.appendingPathComponent("initdb"),
            ["-D", data.path, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"]
                + (options.syncsToDisk ? [] : ["--no-sync"]),
            as: serverUser, in: directory)
        var lastError: Error?
        for attempt in 0..<5 {
            let port = try options.port ?? freePort()
            var settings: [String: String] = [
                "listen_addresses": "'127.0.0.1'",
                "port": String(port),
                "unix_socket_directories": "'\(directory.path)'",
                "fsync": options.syncsToDisk ? "on" : "off",
                "synchronous_commit": options.syncsToDisk ? "on" : "off",
                "full_page_writes": options.syncsToDisk ? "on" : "off",
                "max_connections": "300",
                "shared_buffers": "64MB",
            ]
            for (key, value) in options.settings { settings[key] = value }
            let conf = settings.keys.sorted().map { "\($0) = \(settings[$0] ?? "")" }
                .joined(separator: "\n")
            let autoConf = data.appendingPathComponent("postgresql.auto.conf")
            do {
                try ("# written by pgdatakit\n" + conf + "\n").write(to: autoConf, atomically: false, encoding: .utf8)
            } catch {
                throw EmbeddedPostgresError.fileSystem("writing \(autoConf.path): \(error)")
            }
            let server = EmbeddedPostgres(
                address: Address(port: port), directory: directory, binDirectory: bin,
                serverUser: serverUser)
            do {
                try runCommand(
                    bin.appendingPathComponent("pg_ctl"),
                    ["-D", data.path, "-l", server.logFile.path, "-w", "-t", "60", "start"],
                    as: serverUser, in: directory)
                try server.writeDescription()
                return server
            } catch {
                lastError = error
                let log = (try? String(contentsOf: server.logFile, encoding: .utf8)) ?? ""
                // Another process took the port between our probe and the server's bind.
                guard options.port == nil, log.contains("Address already in use"), attempt < 4 else {
                    break
                }
            }
        }
        throw lastError ?? EmbeddedPostgresError.fileSystem("server did not start")
    }

    /// Stops the server and deletes its folder, data included. Stopping twice is
    /// harmless, and so is stopping a server whose process already died (killed,
    /// crashed): then only the folder is removed. To keep the data of a server that died,
    /// `restart(port:)` it instead, or `moveAside()` its folder.
    ///
    /// With `PGDATAKIT_SERVER_LOG_DIR` set (to a folder, made when missing), the server's
    /// log is copied there first, as `<the server's folder name>.log`: how a test run that
    /// failed keeps what the server said (`scripts/flake-hunt` sets it). The log can hold
    /// values from the data (PostgreSQL's error details name the keys of a conflict).
    ///
    /// - Throws: `EmbeddedPostgresError` when `pg_ctl stop` fails (the folder is kept so
    ///   the log can be read).
    public func stop() throws {
        try stop(keepingLogIn: ProcessInfo.processInfo.environment["PGDATAKIT_SERVER_LOG_DIR"])
    }

    /// Stops the server as `stop()` does, first copying its log into `logFolder` when one
    /// is given (not empty).
    package func stop(keepingLogIn logFolder: String?) throws {
        guard markStopped() else { return }
        // A dead postmaster leaves its postmaster.pid behind; `pg_ctl stop` would wait
        // for a zombie (or signal whoever reused the pid), so it is only asked to stop a
        // live one.
        if postmasterIsAlive() {
            try EmbeddedPostgres.runCommand(
                binDirectory.appendingPathComponent("pg_ctl"),
                ["-D", dataDirectory.path, "-m", "fast", "-w", "-t", "60", "stop"],
                as: serverUser, in: directory)
        }
        if let logFolder, !logFolder.isEmpty { keepLog(in: logFolder) }
        try? FileManager.default.removeItem(at: directory)
        EmbeddedPostgres.logger.debug("stopped", metadata: ["directory": "\(directory.path)"])
    }

    /// Copies the server's log into `folder` (made when missing) as
    /// `<the server's folder name>.log`; a failure is logged, not thrown (the server is
    /// stopped either way).
    private func keepLog(in folder: String) {
        let target = URL(fileURLWithPath: folder, isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                at: logFile, to: target.appendingPathComponent(directory.lastPathComponent + ".log"))
        } catch {
            EmbeddedPostgres.logger.warning("could not keep the server's log in \(folder): \(error)")
        }
    }

    /// Whether `stop()` (or `moveAside()`) has been called.
    public var isStopped: Bool { stopped.withLock { $0 } }

    /// Marks the handle stopped without touching the folder (it was moved aside); `false`
    /// when it already was.
    func markStopped() -> Bool {
        let alreadyStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        if !alreadyStopped { Registry.remove(self) }
        return !alreadyStopped
    }

    /// Finds the server binaries: `PGDATAKIT_POSTGRES_BIN`, then the newest
    /// `<systemDirectory>/*/bin` (Debian's layout), then `PATH`.
    ///
    /// - Parameters:
    ///   - environment: where `PGDATAKIT_POSTGRES_BIN` and `PATH` are read.
    ///   - systemDirectory: the folder holding one folder per installed major version.
    /// - Throws: `EmbeddedPostgresError` with code `.binariesNotFound`, listing where it
    ///   looked.
    public static func locateBinaries(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        systemDirectory: String = "/usr/lib/postgresql"
    ) throws -> URL {
        var candidates: [String] = []
        if let override = environment["PGDATAKIT_POSTGRES_BIN"], !override.isEmpty {
            candidates.append(override)
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: systemDirectory)) ?? []
        let sorted = versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
        candidates += sorted.map { "\(systemDirectory)/\($0)/bin" }
        candidates += (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let needed = ["initdb", "pg_ctl", "postgres"]
        for candidate in candidates {
            let ok = needed.allSatisfy {
                FileManager.default.isExecutableFile(atPath: candidate + "/" + $0)
            }
            if ok { return URL(fileURLWithPath: candidate) }
        }
        throw EmbeddedPostgresError.binariesNotFound(searched: ["\(systemDirectory)/*/bin"] + candidates)
    }

    // MARK: - Shared server

    private static let shared = Mutex<EmbeddedPostgres?>(nil)

    /// The URL to use: `DATABASE_URL` when it is set, otherwise the URL of a throwaway
    /// server started on first call and shared by the whole process (stopped at exit).
    ///
    /// For example:
    ///
    /// ```swift
    /// let pool = ConnectionPool(
    ///     configuration: ConnectionConfiguration(try EmbeddedPostgres.environmentOrSharedURL()))
    /// ```
    ///
    /// - Throws: `EmbeddedPostgresError` when a server is needed and cannot start.
    public static func environmentOrSharedURL(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> String {
        if let url = environment["DATABASE_URL"], !url.isEmpty { return url }
        return try shared.withLock { shared in
            if let server = shared, !server.isStopped { return server.url }
            let server = try start()
            shared = server
            return server.url
        }
    }

    // MARK: - Reattaching (pgdatakit db start / stop)

    private struct Description: Codable {
        var url: String
        var port: Int
        var binDirectory: String
        var serverUser: String?
    }

    func writeDescription() throws {
        let description = Description(
            url: url, port: port, binDirectory: binDirectory.path, serverUser: serverUser)
        do {
            try JSONEncoder().encode(description).write(to: directory.appendingPathComponent("pgdatakit.json"))
        } catch {
            throw EmbeddedPostgresError.fileSystem("writing pgdatakit.json: \(error)")
        }
    }

    /// Re-opens the handle of a server started earlier (by another process) in
    /// `directory`, to read its URL, check that it still runs (`liveness()`), restart it
    /// after a crash (`restart(port:)`) or stop it.
    ///
    /// - Throws: `EmbeddedPostgresError` with code `.notAServerDirectory` when the
    ///   folder does not hold such a server.
    public static func attach(to directory: URL) throws -> EmbeddedPostgres {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent("pgdatakit.json")),
            let description = try? JSONDecoder().decode(Description.self, from: data)
        else { throw EmbeddedPostgresError.notAServerDirectory(directory.path) }
        return EmbeddedPostgres(
            address: Address(url: description.url, port: description.port), directory: directory,
            binDirectory: URL(fileURLWithPath: description.binDirectory),
            serverUser: description.serverUser)
    }

    // MARK: - Processes

    @discardableResult
    static func runCommand(
        _ executable: URL, _ arguments: [String], as user: String?, in directory: URL
    ) throws -> String {
        var executablePath = executable.path
        var fullArguments = arguments
        if let user {
            executablePath = "/usr/sbin/runuser"
            fullArguments = ["-u", user, "--", executable.path] + arguments
        }
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        environment.removeValue(forKey: "PGDATA")
        let command = ([executable.lastPathComponent] + arguments).joined(separator: " ")
        let outcome = try ChildProcess.run(
            executablePath, fullArguments, in: directory, environment: environment)
        guard outcome.status == 0 else {
            throw EmbeddedPostgresError.commandFailed(command: command, status: outcome.status, output: outcome.output)
        }
        return outcome.output
    }

    /// Starts a detached shell that stops the server and removes the folder once this
    /// process is gone, even if it was killed.
    private func startWatchdog() {
        do {
            try Self.launchCleanupWatchdog(named: "pgdatakit-watchdog", folder: directory, dataDirectory: dataDirectory)
        } catch {
            EmbeddedPostgres.logger.warning("could not start the cleanup watchdog: \(error)")
        }
    }

    /// Starts a detached shell (shown as `name`) that, once this process is gone — even
    /// killed —, stops the server running on `dataDirectory` (`SIGQUIT` to the pid in its
    /// `postmaster.pid`) and removes `folder`.
    static func launchCleanupWatchdog(named name: String, folder: URL, dataDirectory: URL) throws {
        let script = """
            trap '' INT TERM HUP
            while kill -0 "$1" 2>/dev/null; do sleep 1; done
            if [ -f "$3/postmaster.pid" ]; then
              kill -QUIT "$(head -n 1 "$3/postmaster.pid")" 2>/dev/null
              sleep 1
            fi
            rm -rf "$2"
            """
        try ChildProcess.launchDetached(
            "/bin/sh", ["-c", script, name, String(getpid()), folder.path, dataDirectory.path],
            in: URL(fileURLWithPath: "/"))
    }

    /// Asks the kernel for a free TCP port on 127.0.0.1.
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else {
            throw EmbeddedPostgresError.fileSystem("socket: \(String(cString: strerror(errno)))")
        }
        defer { _ = Glibc.close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0
                    && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else {
            throw EmbeddedPostgresError.fileSystem("bind: \(String(cString: strerror(errno)))")
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The servers to stop when the process exits normally.
    private enum Registry {
        static let servers = Mutex<[ObjectIdentifier: EmbeddedPostgres]>([:])
        static let installed = Mutex(false)

        static func add(_ server: EmbeddedPostgres) {
            let install = installed.withLock { installed in
                defer { installed = true }
                return !installed
            }
            if install {
                atexit { EmbeddedPostgres.Registry.stopAll() }
            }
            servers.withLock { $0[ObjectIdentifier(server)] = server }
        }

        static func remove(_ server: EmbeddedPostgres) {
            _ = servers.withLock { $0.removeValue(forKey: ObjectIdentifier(server)) }
        }

        static func stopAll() {
            let all = servers.withLock { servers in
                defer { servers.removeAll() }
                return Array(servers.values)
            }
            for server in all {
                do {
                    try server.stop()
                } catch {
                    logger.warning("could not stop the throwaway server: \(error)")
                }
            }
        }
    }
}
