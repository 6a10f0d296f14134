import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Whether the processes of one host share one listening session.
///
/// PostgreSQL wakes every listening session on every notifying commit: with one listener
/// per process, each save costs the server one wakeup, queue read and send per process,
/// and each notifying commit waits for them (see "Write rate and its ceiling" in the
/// Several processes article). With a relay (the default), the first process of a host to listen hosts one
/// `LISTEN` session and passes its notifications on over a Unix socket to the host's
/// other processes that use the same server, database, user and channel; each process
/// still keeps its own session for reading the change log, its own position and
/// its own exactly-once delivery. The hosting process also reads the log for the host:
/// it checks for saves no notification announced
/// (`ChangeLogOptions.unannouncedCheckInterval`) and passes on what its reads find and
/// their positions, which the others adopt, so they need not read the log to follow
/// other processes' saves (should its positions stop for three check intervals, each
/// of them checks the log itself until they come again). The others also hand the
/// payloads of their saves to the hosting process, whose notifier sends them with its own
/// in one notifying transaction: one notifier session per host, and fewer notifying
/// commits for the server. When the hosting process ends (or its session drops),
/// the others catch up from the change log, as after losing a session of their own, and
/// one of them takes over.
///
/// For example, to give every process its own listening session:
///
/// ```swift
/// let manager = try ContextManager(
///     configuration: configuration, entities: [User.self],
///     changeLog: ChangeLogOptions(relay: .off))
/// ```
///
/// The socket and its lock file live in a directory only this user may enter
/// (`$TMPDIR/pgdatakit-relay-<uid>`, or `/tmp/…`); a directory that is not safe, a
/// socket that cannot be made, or a listener session through a connection pooler makes a
/// process listen on its own session instead (logged at debug level).
public struct ListenerRelay: Sendable, Equatable, CustomStringConvertible {
    /// The folder of the socket and lock file; `nil` when off.
    let directory: String?
    private let usesDefaultDirectory: Bool

    /// One listening session per process.
    public static let off = ListenerRelay(directory: nil, usesDefaultDirectory: false)

    /// One listening session per host, user and database, met in
    /// `$TMPDIR/pgdatakit-relay-<uid>` (or `/tmp/pgdatakit-relay-<uid>`).
    public static let automatic = ListenerRelay(directory: nil, usesDefaultDirectory: true)

    /// One listening session per host, met in `path` (a folder this user owns and only
    /// this user may enter; created with mode 700 when missing). Processes that share a
    /// relay must name the same folder: in containers, a volume they all mount.
    public static func directory(_ path: String) -> ListenerRelay {
        ListenerRelay(directory: path, usesDefaultDirectory: false)
    }

    /// The folder in effect, if on.
    var effectiveDirectory: String? {
        usesDefaultDirectory ? NotificationRelayEndpoint.defaultDirectory : directory
    }

    /// `off`, `automatic` or `directory(…)`.
    public var description: String {
        if usesDefaultDirectory { return "automatic" }
        return directory.map { "directory(\($0))" } ?? "off"
    }
}

/// Where a change listener's notifications come from, and the session it reads the log
/// with.
enum ListenerSession {
    /// Its own session `LISTEN`s.
    case direct(Connection)
    /// The host's relay passes notifications on; the session only reads the log.
    case relayed(NotificationRelayClient, Connection)

    /// The session for reads of the change log and pruning.
    var connection: Connection {
        switch self {
        case .direct(let connection), .relayed(_, let connection): return connection
        }
    }

    func close() {
        connection.close()
    }

    /// Waits until notifications (or, from the relay, a position) arrive, returning all
    /// that have, or until `timeout` passes or `wake` becomes readable (returning `nil`
    /// for either).
    ///
    /// - Throws: `PostgresError` (`.connectionLost`) when the session broke, or
    ///   `LocalSocket.Failure` when the relay went away or fell silent.
    func next(timeout: Duration, wake: Int32) throws -> ListenerArrival? {
        switch self {
        case .direct(let connection):
            guard let first = try connection.waitForNotification(timeout: timeout, wakeDescriptor: wake) else {
                return nil
            }
            return ListenerArrival(notifications: [first] + (try connection.drainNotifications()), position: nil)
        case .relayed(let relay, let connection):
            let deadline = ContinuousClock.now + timeout
            while true {
                let remaining = ContinuousClock.now.duration(to: deadline)
                let events = try LocalSocket.poll(
                    [(relay.descriptor, Int16(POLLIN)), (connection.socketDescriptor, Int16(POLLIN)), (wake, Int16(POLLIN))],
                    timeout: min(max(.zero, remaining), NotificationRelayClient.silenceLimit))
                if events[2] != 0 { return nil }
                // The log session is idle between reads: anything arriving on it is the
                // server ending it (a terminated backend), noticed here rather than at the
                // next read.
                if events[1] != 0, !connection.isUsable {
                    throw PostgresError(kind: .connectionLost, message: "the listener's session was closed by the server")
                }
                if events[0] != 0 {
                    let (notifications, position) = try relay.receiveMessages()
                    if !notifications.isEmpty || position != nil {
                        return ListenerArrival(notifications: notifications, position: position)
                    }
                }
                if relay.silence > NotificationRelayClient.silenceLimit {
                    throw LocalSocket.Failure(
                        "the notification relay sent nothing for \(NotificationRelayClient.silenceLimit)", code: ETIMEDOUT)
                }
                if remaining <= .zero { return nil }
            }
        }
    }
}

/// What a change listener's thread holds between actions (`ChangeListener.run`).
struct ListenerLoop {
    /// The current session, if any.
    var session: ListenerSession?
    /// The relay the session follows, when this process hosts it: the listener then
    /// checks the log for the host, and passes on to the relay's other processes
    /// what its reads find and their positions.
    var passesOn: NotificationRelay?
    /// Where the listener stands in the log, once a session took a position.
    var feed: ChangeFeedPosition?
    /// Whether the session's relay was asked to pace its notifications (`quietPace`).
    var paced = false

    /// How often a follower of another process's relay has its notifications passed on
    /// while no observer wants records and no waker waits (a writer that never read its
    /// main context): it reads only their headers then, and need not wake for each burst
    /// (`NotificationRelayClient.setPace(_:)`). An observer that starts wanting records
    /// gets them from the next delivery on, at most this much later.
    static let quietPace: Duration = .milliseconds(100)

    /// Asks the relay the session follows (when another process hosts it) to pace its
    /// notifications while they can wait (`quiet`, asked only of such a session), and to
    /// pass them on as they come again once they cannot; whether it asked for a change.
    ///
    /// - Throws: `LocalSocket.Failure` when the relay's socket fails.
    mutating func pace(quiet: @autoclosure () -> Bool) throws -> Bool {
        guard case .relayed(let client, _)? = session, passesOn == nil else { return false }
        let quiet = quiet()
        guard quiet != paced else { return false }
        try client.setPace(quiet ? Self.quietPace : .zero)
        paced = quiet
        return true
    }
}

extension NotificationRelay {
    /// A started relay of `endpoint`, whose lock this process took (closed here if the
    /// relay cannot be made), forwarding its followers' payloads to `notifier`.
    static func hosted(
        _ endpoint: NotificationRelayEndpoint, lock: Int32, configuration: ConnectionConfiguration, logger: Logger,
        notifier: ChangeNotifier
    ) throws -> NotificationRelay {
        let relay: NotificationRelay
        do {
            relay = try NotificationRelay(
                endpoint: endpoint, lockDescriptor: lock, configuration: configuration, channel: ChangeLog.channel,
                logger: logger, forward: { notifier.postForwarded($0) })
        } catch {
            close(lock)
            throw error
        }
        do {
            try relay.start()
        } catch {
            relay.stop()
            throw error
        }
        return relay
    }
}

/// What arrived on a listener's session.
struct ListenerArrival {
    /// The notifications, in the order they came.
    var notifications: [PostgresNotification]
    /// The last position the process hosting the relay passed on with them (the
    /// position of one of its reads of the log), to adopt once the notifications were
    /// handled (`ChangeFeedPosition.adopt(relayed:)`); `nil` on the listener's own session.
    var position: String?
}
