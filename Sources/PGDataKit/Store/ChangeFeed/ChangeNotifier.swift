import Dispatch
import Foundation
import Logging
import Synchronization

/// Sends the notifications of this process's saves, after they committed, on a session
/// of its own.
///
/// A transaction that notifies holds PostgreSQL's database-wide notification lock from
/// queueing its notifications until its commit is flushed, so notifying commits cannot
/// share a WAL flush and serialise on that lock (a third of the plain commit rate at 8
/// writers and more). A save therefore commits its rows and change record without a
/// `NOTIFY`, and hands the record's payload here once the `COMMIT` answered. The
/// notifier sends what has gathered in one small transaction of its own — one statement
/// that turns `synchronous_commit` off for that transaction and calls `pg_notify` once
/// per notification, in order, the payloads that fit together sharing one
/// (`ChangeLog.combined`) — so the lock is held for the length of a commit that is not
/// flushed, and payloads of saves that committed together share it. The save's own commit, its
/// durability and its reported outcome are untouched.
///
/// On a host whose processes share a listener relay (`ChangeLogOptions.relay`), a process
/// that follows the relay hands its payloads to the hosting process instead
/// (`route(through:)`), whose notifier sends them with its own: the host's saves share
/// notifying transactions whichever process made them, so the server commits one
/// notifying transaction for several processes' saves rather than one per process and
/// save. Should the relay not take them, they go out on this notifier's own session.
///
/// A notification is only a wake-up and a carrier: exactly-once delivery rests on the
/// change log and each listener's snapshot position. A payload this notifier cannot send
/// (its session failed twice, the process ended first) is found by the listeners' check
/// for records no notification announced (`ChangeLogOptions.unannouncedCheckInterval`).
package final class ChangeNotifier: Sendable {
    /// The application name the notifier's session shows in `pg_stat_activity`.
    static let applicationName = "pgdatakit notifier"
    /// The most payloads one notifying transaction carries.
    static let batchLimit = 256
    /// One statement, its own transaction: `synchronous_commit` off for that transaction
    /// only (`set_config(…, true)` lasts until its commit, which reads it), then one
    /// `pg_notify` per notification in the array's order (volatile calls are made after the
    /// sort).
    static let notifySQL = """
        SELECT pg_notify($1, u.p), s.setting
        FROM (SELECT set_config('synchronous_commit', 'off', true) AS setting) AS s,
             unnest($2::text[]) WITH ORDINALITY AS u(p, n)
        ORDER BY u.n
        """
    /// `notifySQL` for one notification (a save with no other gathered while the last
    /// went out, the common case off a busy host, or payloads that fit in one): the
    /// payload as a plain text parameter, not escaped into an array literal (which cost
    /// more than three thousand instructions for a record's payload).
    static let notifyOneSQL = "SELECT pg_notify($1, $2), set_config('synchronous_commit', 'off', true)"

    private struct State {
        var pending: [String] = []
        var isSending = false
        var isClosed = false
        /// Whether sending is held back (tests: a save whose process ends before its
        /// notification goes out).
        var isHeld = false
        var connection: Connection?
        var transactions = 0
        var sent = 0
        var notifications = 0
        /// The relay this process follows (another process hosts it), when payloads go
        /// to that process's notifier through it.
        var route: NotificationRelayClient?
        var routed = 0
    }

    private let configuration: ConnectionConfiguration
    private let logger: Logger
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "pgdatakit.notifier")

    /// A notifier that connects with `configuration` (named `applicationName`) when it
    /// first has something to send.
    init(configuration: ConnectionConfiguration, logger: Logger) {
        self.configuration = configuration.named(Self.applicationName)
        self.logger = logger
        Self.registerExitFlush()
        Self.live.withLock { $0[ObjectIdentifier(self)] = LiveNotifier(notifier: self) }
    }

    deinit { Self.live.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) } }

    // MARK: - Process exit

    /// A notifier that may still have something to send when the process exits.
    private struct LiveNotifier: Sendable {
        weak var notifier: ChangeNotifier?
    }

    /// The notifiers of this process, flushed when it exits.
    private static let live = Mutex<[ObjectIdentifier: LiveNotifier]>([:])
    /// Registers `flushLiveNotifiers` with `atexit` (once).
    private static let exitFlush: Void = { atexit { ChangeNotifier.flushLiveNotifiers() } }()
    /// The longest a process's exit waits for each notifier.
    static let exitFlushTimeout: DispatchTimeInterval = .seconds(2)

    private static func registerExitFlush() { Self.exitFlush }

    /// At `exit()`: each notifier finishes what it is sending and sends what is pending
    /// (up to `exitFlushTimeout` each). A process that saves and exits then announces its
    /// last saves at once, and its exit does not tear libpq down under a send (a
    /// connection being opened on the notifier's thread while `exit()` ran its handlers
    /// aborted the process).
    private static func flushLiveNotifiers() {
        let notifiers = live.withLock { $0.values.compactMap(\.notifier) }
        for notifier in notifiers { notifier.flush(timeout: exitFlushTimeout) }
    }

    /// Sends what is pending (after a send under way), waiting up to `timeout`.
    func flush(timeout: DispatchTimeInterval) {
        let done = DispatchSemaphore(value: 0)
        queue.async {
            let batch = self.state.withLock { state -> [String] in
                guard !state.isHeld, !state.isClosed else { return [] }
                defer { state.pending = [] }
                return state.pending
            }
            if !batch.isEmpty { self.sendInBatches(batch) }
            done.signal()
        }
        _ = done.wait(timeout: .now() + timeout)
    }

    /// Queues the payload of a committed save; it goes out after those queued before it.
    /// Nothing is sent once the notifier is closed.
    ///
    /// A process that follows its host's relay, with nothing queued or being sent, hands
    /// the payload to the hosting process from the calling thread instead: a socket write
    /// that does not wait (`NotificationRelayClient.sendWithoutWaiting`), so a save does
    /// not wake the notifier's queue. When the socket takes nothing at once, it is queued
    /// as before.
    func post(_ payload: String) {
        if sendsDirectly(payload) { return }
        enqueue([payload])
    }

    /// `post(_:)`'s way past the queue: whether the payload went to the relay's hosting
    /// process from this thread.
    private func sendsDirectly(_ payload: String) -> Bool {
        let route = state.withLock { state -> NotificationRelayClient? in
            guard !state.isClosed, !state.isHeld, !state.isSending, state.pending.isEmpty else { return nil }
            return state.route
        }
        guard let route else { return false }
        do {
            guard try route.sendWithoutWaiting(toNotify: [payload]) else { return false }
            state.withLock { $0.routed += 1 }
            return true
        } catch {
            // (Part of it may have gone: a payload twice is delivered once.)
            state.withLock { if $0.route === route { $0.route = nil } }
            logger.debug("notifying on this process's own session: the host's relay did not take a payload: \(error)")
            return false
        }
    }

    /// Holds payloads back (`true`) or sends them again (`false`), for tests of a process
    /// that ends between its commits and their notifications.
    package func hold(_ held: Bool) {
        let starts = state.withLock { state -> Bool in
            state.isHeld = held
            guard !held, !state.isSending, !state.pending.isEmpty, !state.isClosed else { return false }
            state.isSending = true
            return true
        }
        if starts { queue.async { self.sendPending() } }
    }

    /// How many notifying transactions were sent, how many payloads they carried, and how
    /// many payloads went to the hosting process of the relay instead.
    var counts: (transactions: Int, payloads: Int, routed: Int) {
        state.withLock { ($0.transactions, $0.sent, $0.routed) }
    }

    /// How many notifications the notifying transactions sent (payloads that fit together
    /// share one: `ChangeLog.combined`).
    var notificationCount: Int { state.withLock { $0.notifications } }

    /// Sends later payloads through `client`, a session following the host's relay that
    /// another process hosts (its notifier sends them), or with `nil` on this notifier's
    /// own session.
    func route(through client: NotificationRelayClient?) {
        state.withLock { $0.route = client }
    }

    /// Queues payloads the relay this process hosts took from the host's other processes
    /// (`NotificationRelay`'s `forward`): they go out with this process's own. Dropped
    /// once the notifier is closed (the listeners find their records in the log).
    func postForwarded(_ payloads: [String]) {
        enqueue(payloads)
    }

    /// Queues payloads after those queued before, and starts sending unless a send is
    /// under way (it takes them next) or sending is held.
    private func enqueue(_ payloads: [String]) {
        let starts = state.withLock { state -> Bool in
            guard !state.isClosed else { return false }
            state.pending += payloads
            guard !state.isSending, !state.isHeld else { return false }
            state.isSending = true
            return true
        }
        if starts { queue.async { self.sendPending() } }
    }

    /// Sends what is pending (waiting for a send under way), then closes the session;
    /// later payloads are dropped.
    func close() {
        Self.live.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
        state.withLock { $0.isClosed = true }
        queue.sync {
            let (batch, connection) = state.withLock { state -> ([String], Connection?) in
                defer {
                    state.pending = []
                    state.connection = nil
                }
                return (state.isHeld ? [] : state.pending, state.connection)
            }
            if !batch.isEmpty { sendInBatches(batch) }
            (state.withLock { $0.connection.take() } ?? connection)?.close()
        }
    }

    /// Sends pending payloads in batches until none are left (on `queue`).
    private func sendPending() {
        while true {
            let batch = state.withLock { state -> [String]? in
                guard !state.pending.isEmpty, !state.isHeld, !state.isClosed else {
                    state.isSending = false
                    return nil
                }
                let count = min(state.pending.count, Self.batchLimit)
                defer { state.pending.removeFirst(count) }
                return Array(state.pending.prefix(count))
            }
            guard let batch else { return }
            send(batch)
        }
    }

    private func sendInBatches(_ payloads: [String]) {
        var start = 0
        while start < payloads.count {
            let end = min(start + Self.batchLimit, payloads.count)
            send(Array(payloads[start..<end]))
            start = end
        }
    }

    /// Hands a batch to the relay's hosting process (`route`), or sends one notifying
    /// transaction; a failed session is replaced once. A batch that still fails is
    /// dropped (logged): the listeners find its records in the log.
    private func send(_ payloads: [String]) {
        if let route = state.withLock({ $0.route }) {
            do {
                try route.send(toNotify: payloads)
                state.withLock { $0.routed += payloads.count }
                return
            } catch {
                // (Some may have gone: a payload twice is delivered once.)
                state.withLock { if $0.route === route { $0.route = nil } }
                logger.debug("notifying on this process's own session: the host's relay did not take the payloads: \(error)")
            }
        }
        for attempt in 1...2 {
            do {
                let connection = try session()
                // Committed saves are announced even from a cancelled task's thread
                // (`close()` may run there).
                // (As few notifications as the payloads fit in: `ChangeLog.combined`.)
                let notifications = ChangeLog.combined(payloads)
                _ = try StatementCancellation.run(nil) {
                    if notifications.count == 1 {
                        try connection.execute(Self.notifyOneSQL, [ChangeLog.channel, notifications[0]])
                    } else {
                        try connection.execute(Self.notifySQL, [ChangeLog.channel, notifications])
                    }
                }
                state.withLock {
                    $0.transactions += 1
                    $0.sent += payloads.count
                    $0.notifications += notifications.count
                }
                return
            } catch {
                state.withLock { $0.connection.take() }?.close()
                guard attempt == 2 else { continue }
                logger.warning(
                    "could not send the notifications of \(payloads.count) committed saves (other processes find them in the change log within a second): \(error)"
                )
            }
        }
    }

    /// The notifier's session, opened when missing.
    private func session() throws -> Connection {
        if let connection = state.withLock({ $0.connection }) { return connection }
        let connection = try Connection(configuration, logger: logger)
        state.withLock { $0.connection = connection }
        return connection
    }
}
