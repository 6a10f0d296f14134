import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where the processes of one host meet to share one `LISTEN` session: a Unix socket and
/// a lock file in a directory only this user may enter, both named after the database
/// session they stand for (server endpoints, database, user) and the channel.
///
/// The process that takes the lock hosts the relay (`NotificationRelay`); the others
/// connect to its socket. The relay's first message repeats the endpoint's `key`, and a
/// follower that reads another key goes its own way, so a name clash can never hand one
/// database's notifications to a listener of another.
package struct NotificationRelayEndpoint: Sendable, Equatable {
    /// What the relay stands for: endpoints, database, user and channel, one per line.
    let key: String
    /// The socket's path.
    let socketPath: String
    /// The lock file's path: its holder hosts the relay.
    let lockPath: String

    /// The endpoint for listening on `channel` with `configuration`, in `directory` (a
    /// folder this user owns and only this user may enter; created when missing). `nil`
    /// when the configuration cannot be parsed.
    ///
    /// - Throws: `LocalSocket.Failure` when the directory cannot be made or is not safe
    ///   (another owner, a symbolic link, open to others).
    package init?(configuration: ConnectionConfiguration, channel: String, directory: String) throws {
        guard let parameters = configuration.parameters() else { return nil }
        let user = parameters["user"] ?? ""
        let database = parameters["dbname"] ?? user
        let key = [
            "pgdatakit relay 4", ConnectionConfiguration.endpoints(parameters), database, user, channel,
        ].joined(separator: "\n")
        try Self.prepare(directory)
        let name = Self.name(of: key)
        self.key = key
        self.socketPath = directory + "/" + name + ".sock"
        self.lockPath = directory + "/" + name + ".lock"
        guard socketPath.utf8.count <= LocalSocket.maximumPathLength else {
            throw LocalSocket.Failure("socket path", path: socketPath, code: ENAMETOOLONG)
        }
    }

    /// The default directory: `pgdatakit-relay-<uid>` in `$TMPDIR` (or `/tmp` when that
    /// is unset or too long for a socket path).
    package static var defaultDirectory: String {
        let name = "pgdatakit-relay-\(geteuid())"
        if let temporary = ProcessInfo.processInfo.environment["TMPDIR"], !temporary.isEmpty,
            temporary.utf8.count + name.utf8.count + 40 <= LocalSocket.maximumPathLength
        {
            return (temporary.hasSuffix("/") ? String(temporary.dropLast()) : temporary) + "/" + name
        }
        return "/tmp/" + name
    }

    /// 32 hex digits naming a key's files: two 64-bit FNV-1a hashes (different offset
    /// bases). Stable across processes (Swift's `Hasher` is seeded per process); a clash
    /// is harmless, since followers compare the whole key.
    static func name(of key: String) -> String {
        var first: UInt64 = 0xcbf2_9ce4_8422_2325
        var second: UInt64 = 0x6c62_272e_07bb_0142
        for byte in key.utf8 {
            first = (first ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            second = (second ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex(first) + hex(second)
    }

    /// Takes the hosting lock without waiting: its descriptor (held while hosting; closing
    /// it lets another process host), or `nil` when another holds it.
    package func tryLock() throws -> Int32? {
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw LocalSocket.Failure("open", path: lockPath) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let code = errno
            close(descriptor)
            if code == EWOULDBLOCK { return nil }
            throw LocalSocket.Failure("flock", path: lockPath, code: code)
        }
        return descriptor
    }

    /// Creates the directory (mode 700) or checks an existing one: a real directory, owned
    /// by this user, closed to group and others.
    private static func prepare(_ directory: String) throws {
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw LocalSocket.Failure("mkdir", path: directory)
        }
        var status = stat()
        guard lstat(directory, &status) == 0 else { throw LocalSocket.Failure("lstat", path: directory) }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw LocalSocket.Failure("not a directory:", path: directory, code: ENOTDIR)
        }
        guard status.st_uid == geteuid(), status.st_mode & 0o077 == 0 else {
            throw LocalSocket.Failure("owned by another user or open to others:", path: directory, code: EPERM)
        }
    }
}
