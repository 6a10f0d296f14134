import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension EmbeddedPostgres {
    /// Starts the server again on its own data directory after its postmaster died
    /// (`kill -9`, the out-of-memory killer, a crash, a reboot): PostgreSQL replays its
    /// write-ahead log (crash recovery), so what was committed is there again.
    ///
    /// First it waits for what is left of the dead server: the postmaster's children
    /// hold its shared memory, and PostgreSQL refuses to start while they run. Idle ones
    /// exit at once; a busy backend only when it next waits. After 5 seconds the ones
    /// still there get `SIGQUIT` — what a postmaster sends its children after a crash —
    /// and 5 more seconds to exit. Then it removes the stale `postmaster.pid` and socket
    /// lock file (a killed postmaster left unreaped as a zombie would otherwise still look
    /// alive to PostgreSQL) and starts the server with `pg_ctl`.
    ///
    /// The server listens on `port`; when `nil`, on its old port when that is free and
    /// on a free one otherwise. `url` and `port` follow, and the folder's description is
    /// updated for later `attach(to:)`. Two processes must not restart the same folder
    /// at once: serialise callers (`pgdatakit db` holds a lock file).
    ///
    /// For example:
    ///
    /// ```swift
    /// let server = try EmbeddedPostgres.attach(to: directory)
    /// if server.liveness() == .dead { try server.restart() }
    /// ```
    ///
    /// - Parameter requestedPort: the port to listen on; `nil` for the old one when it is
    ///   free.
    /// - Throws: `EmbeddedPostgresError` with code `.alreadyRunning` when the postmaster
    ///   runs (or still recovers after two minutes), `.oldProcessesRemain` when the dead
    ///   one's children do not exit, `.portInUse` when `port` is taken, `.cannotRestart`
    ///   (with what the server logged) when PostgreSQL fails to start on the data
    ///   directory, and `.notAServerDirectory` after `stop()`. The folder is left as it
    ///   was; `moveAside()` puts a damaged one out of the way without deleting it.
    public func restart(port requestedPort: Int? = nil) throws {
        guard !isStopped else { throw EmbeddedPostgresError.notAServerDirectory(directory.path) }
        let alreadyRunning = EmbeddedPostgresError.alreadyRunning(directory: directory.path)
        guard !postmasterIsAlive() else { throw alreadyRunning }
        try waitForRemainingServerProcesses()
        removeStaleLockFiles()
        var port = requestedPort ?? self.port
        for attempt in 0..<5 {
            try setConfiguredPort(port)
            let logStart = logSize()
            do {
                try Self.runCommand(
                    binDirectory.appendingPathComponent("pg_ctl"),
                    ["-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "120", "start"],
                    as: serverUser, in: directory)
            } catch {
                // `pg_ctl -w` gave up waiting while the server still recovers.
                if postmasterIsAlive() { throw alreadyRunning }
                let log = logText(from: logStart)
                if log.contains("Address already in use") {
                    guard requestedPort == nil, attempt < 4 else {
                        throw EmbeddedPostgresError.portInUse(port)
                    }
                    port = try Self.freePort()
                    continue
                }
                if log.contains("pre-existing shared memory block") {
                    throw EmbeddedPostgresError.oldProcessesRemain(
                        directory: directory.path, pids: remainingServerProcesses())
                }
                throw EmbeddedPostgresError.cannotRestart(
                    directory: directory.path, log: log.isEmpty ? "\(error)" : log)
            }
            address.withLock { $0 = Address(port: port) }
            try writeDescription()
            Self.logger.debug("restarted", metadata: ["url": "\(url)", "directory": "\(directory.path)"])
            return
        }
        throw EmbeddedPostgresError.portInUse(port)
    }

    /// Moves the folder of a server that does not run out of the way, to
    /// `<directory>.damaged-<UTC date and time>` next to it, and returns where it went:
    /// for a server that `restart(port:)` cannot bring back, whose data is kept for a
    /// look or a manual recovery instead of being deleted. The handle counts as stopped
    /// afterwards; nothing deletes the moved folder.
    ///
    /// For example:
    ///
    /// ```swift
    /// do {
    ///     try server.restart()
    /// } catch let error as EmbeddedPostgresError where error.code == .cannotRestart {
    ///     let kept = try server.moveAside()
    ///     print("\(error); its folder is now \(kept.path)")
    /// }
    /// ```
    ///
    /// - Throws: `EmbeddedPostgresError` with code `.alreadyRunning` when the postmaster
    ///   runs, `.fileSystem` when the folder cannot be moved, `.notAServerDirectory` after
    ///   `stop()`.
    @discardableResult
    public func moveAside() throws -> URL {
        guard !isStopped else { throw EmbeddedPostgresError.notAServerDirectory(directory.path) }
        guard !postmasterIsAlive() else {
            throw EmbeddedPostgresError.alreadyRunning(directory: directory.path)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let base = directory.path + ".damaged-" + formatter.string(from: Date())
        var destination = URL(fileURLWithPath: base)
        var suffix = 2
        while FileManager.default.fileExists(atPath: destination.path) {
            destination = URL(fileURLWithPath: base + "-\(suffix)")
            suffix += 1
        }
        guard rename(directory.path, destination.path) == 0 else {
            throw EmbeddedPostgresError.fileSystem(
                    "moving \(directory.path) to \(destination.path): \(String(cString: strerror(errno)))")
        }
        _ = markStopped()
        Self.logger.debug("moved aside", metadata: ["from": "\(directory.path)", "to": "\(destination.path)"])
        return destination
    }

    /// Waits, bounded, for the dead postmaster's children to exit; `SIGQUIT`s those that
    /// do not within 5 seconds.
    private func waitForRemainingServerProcesses() throws {
        func waitUntilGone(seconds: Int) -> [pid_t] {
            let deadline = ContinuousClock.now + .seconds(seconds)
            var remaining = remainingServerProcesses()
            while !remaining.isEmpty, ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.1)
                remaining = remainingServerProcesses()
            }
            return remaining
        }
        guard !waitUntilGone(seconds: 5).isEmpty else { return }
        // Listed again just before the signal, so that only processes that still work in
        // this data directory get it.
        for pid in remainingServerProcesses() {
            Self.logger.debug("SIGQUIT to an old server process", metadata: ["pid": "\(pid)"])
            kill(pid, SIGQUIT)
        }
        let remaining = waitUntilGone(seconds: 5)
        guard remaining.isEmpty else {
            throw EmbeddedPostgresError.oldProcessesRemain(directory: directory.path, pids: remaining.map { Int32($0) })
        }
    }

    /// Removes the lock files of a postmaster that is gone — `postmaster.pid`, and the
    /// socket and its `.s.PGSQL.<port>.lock` in the server's folder — since PostgreSQL
    /// treats the pid in them as alive while it is an unreaped zombie, and refuses to
    /// start. Its shared-memory check (keyed on the data directory) still guards against
    /// leftover processes.
    private func removeStaleLockFiles() {
        let sockets = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasPrefix(".s.PGSQL.") }
            .map { directory.appendingPathComponent($0) }
        for file in [dataDirectory.appendingPathComponent("postmaster.pid")] + sockets {
            if unlink(file.path) != 0, errno != ENOENT {
                Self.logger.debug(
                    "could not remove a stale lock file",
                    metadata: ["file": "\(file.path)", "error": "\(String(cString: strerror(errno)))"])
            }
        }
    }

    /// Points `port` in `postgresql.auto.conf` at `port`, leaving the rest of the file
    /// (and its owner) as it is.
    private func setConfiguredPort(_ port: Int) throws {
        let file = dataDirectory.appendingPathComponent("postgresql.auto.conf")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else {
            // No such file (a damaged folder): PostgreSQL's start will say what is wrong.
            return
        }
        var lines = text.components(separatedBy: "\n")
        let wanted = "port = \(port)"
        let index = lines.firstIndex { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("port") else { return false }
            return trimmed.dropFirst("port".count).trimmingCharacters(in: .whitespaces).hasPrefix("=")
        }
        if let index {
            guard lines[index] != wanted else { return }
            lines[index] = wanted
        } else {
            lines.insert(wanted, at: max(lines.count - 1, 0))
        }
        do {
            try lines.joined(separator: "\n").write(to: file, atomically: false, encoding: .utf8)
        } catch {
            throw EmbeddedPostgresError.fileSystem("writing \(file.path): \(error)")
        }
    }

    private func logSize() -> UInt64 {
        let attributes = try? FileManager.default.attributesOfItem(atPath: logFile.path)
        return (attributes?[.size] as? NSNumber)?.uint64Value ?? 0
    }

    /// The last lines the server logged after `offset`.
    private func logText(from offset: UInt64) -> String {
        guard let handle = FileHandle(forReadingAtPath: logFile.path) else { return "" }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: offset)) != nil, let data = try? handle.readToEnd() else { return "" }
        let lines = String(decoding: data, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: true)
        return lines.suffix(20).joined(separator: "\n")
    }
}
