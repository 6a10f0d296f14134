import Foundation
import Logging
import Synchronization

/// Checks, each time the change listener connects, that its session receives
/// notifications, and reports it once when not.
///
/// A direct session (the server process id libpq got at startup is the server's) passes
/// without a round trip: its `LISTEN` holds. Through a pooler (an id of the pooler's own)
/// the listener also listens on a channel of its own, has a notification sent there from
/// another session (a connection of the coordinator's pool) and waits for it: through a
/// session-mode pooler it arrives within milliseconds; through a transaction-mode pooler
/// it never does, since the server process that ran the `LISTEN` went back to the pool.
final class ListenerSessionCheck: Sendable {
    /// Sends a notification on a channel from another session.
    typealias Send = @Sendable (_ channel: String, _ payload: String) throws -> Void

    private let send: Send
    private let channel: String
    private let timeout: Duration
    private let logger: Logger
    private let found = Mutex<ChangeListenerError?>(nil)

    /// - Parameters:
    ///   - origin: the coordinator's identity (names the probe channel).
    ///   - timeout: how long to wait for the test notification.
    init(origin: UUID, timeout: Duration = .seconds(2), logger: Logger, send: @escaping Send) {
        self.send = send
        self.channel = "pgdatakit_probe_" + origin.uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        self.timeout = timeout
        self.logger = logger
    }

    /// The problem found, if any.
    var problem: ChangeListenerError? { found.withLock { $0 } }

    /// Checks a newly connected listener session (after its `LISTEN`). Notifications of
    /// other channels that arrive meanwhile are dropped: the listener reads the change
    /// log from its position after connecting, whatever was announced.
    ///
    /// - Throws: `PostgresError` when the listener's session broke (a failure to send the
    ///   test notification is logged, not thrown).
    func verify(_ connection: Connection) throws {
        guard connection.isBehindPooler else { return }
        let payload = UUID().uuidString
        try connection.listen(channel)
        defer {
            do {
                try connection.unlisten(channel)
            } catch {
                logger.debug("could not stop listening on the probe channel: \(error)")
            }
        }
        do {
            try send(channel, payload)
        } catch {
            // (The pool is busy or unreachable: no verdict, and no reason to drop the
            // listener's own session.)
            logger.warning("could not check that the change listener receives notifications: \(error)")
            return
        }
        let start = ContinuousClock.now
        while start.duration(to: .now) < timeout {
            let remaining = max(.milliseconds(1), timeout - start.duration(to: .now))
            let notification = try connection.waitForNotification(timeout: remaining)
            if notification?.channel == channel && notification?.payload == payload {
                logger.debug("the change listener goes through a session-mode pooler; notifications arrive")
                return
            }
        }
        let problem = ChangeListenerError.notificationsNotDelivered(
            endpoint: connection.configuration.description, waited: timeout)
        let first = found.withLock { found -> Bool in
            defer { found = problem }
            return found == nil
        }
        if first { logger.error("\(problem)") }
    }
}
