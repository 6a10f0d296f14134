#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import Logging
import Synchronization

/// The change listener of a coordinator: receives the change log's notifications (on a
/// dedicated session that `LISTEN`s, or from the host's relay, `ListenerRelay`), reads
/// records the notifications do not carry, hands them to observers, reconnects with
/// backoff and catches up from its snapshot position after a drop, and prunes.
final class ChangeListener: Sendable {
    /// The application name the listener's session shows in `pg_stat_activity`.
    static let applicationName = "pgdatakit listener"
    /// The application name of the session a host's relay listens on.
    static let relayApplicationName = "pgdatakit relay"

    private struct State {
        var observers: [Int: @Sendable ([ChangeRecord]) -> Void] = [:]
        /// When observers want records (the main context's merge: once it was handed out).
        var wants: [Int: @Sendable () -> Bool] = [:]
        /// Called whenever notifications arrive (this process's own included) and after
        /// each reconnection: history sequences read the log then.
        var wakers: [Int: @Sendable () -> Void] = [:]
        var nextObserverID = 0
        var isRunning = false
        var isStopping = false
        var backendPID: Int32?
        var reconnects = 0
        var pruneAttempts = 0
        var thread: pthread_t?
        /// The host's relay, when this listener hosts it.
        var hostedRelay: NotificationRelay?
        /// Whether the current session gets its notifications through a relay.
        var isRelayed = false
        /// Whether the relay this listener follows paces its notifications (`ListenerLoop.quietPace`).
        var isPaced = false
    }

    private let configuration: ConnectionConfiguration
    private let origin: UUID
    private let options: ChangeLogOptions
    private let logger: Logger
    private let state = Mutex(State())
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)

    /// Whether this listener prunes old records (the role may delete them), at start.
    private let prunes: Bool
    /// Ids of change records this process wrote whose notifications have not come yet.
    let ownRecords = OwnRecordIDs()
    /// Where records read are counted.
    private let metrics: StoreMetrics
    /// Checks that each new session receives notifications (not through a transaction
    /// pooler).
    let sessionCheck: ListenerSessionCheck?
    /// This process's notifier: it sends through the relay this listener follows when
    /// another process hosts it, and takes the payloads of the relay this one hosts.
    private let notifier: ChangeNotifier

    init(
        configuration: ConnectionConfiguration, origin: UUID, options: ChangeLogOptions, prunes: Bool,
        metrics: StoreMetrics, logger: Logger, notifier: ChangeNotifier, sessionCheck: ListenerSessionCheck? = nil
    ) {
        self.notifier = notifier
        self.sessionCheck = sessionCheck
        self.metrics = metrics
        self.prunes = prunes
        self.configuration = configuration
        self.origin = origin
        self.options = options
        self.logger = logger
        var descriptors: [Int32] = [-1, -1]
        if pipe(&descriptors) != 0 {
            logger.error("could not create the listener's wake pipe: \(String(cString: strerror(errno)))")
        }
        self.wakeRead = descriptors[0]
        self.wakeWrite = descriptors[1]
    }

    deinit {
        if wakeRead >= 0 { close(wakeRead) }
        if wakeWrite >= 0 { close(wakeWrite) }
    }

    /// The backend process id of the listener's current session, if connected.
    var backendPID: Int32? { state.withLock { $0.backendPID } }

    /// Whether the current session gets its notifications through the host's relay.
    var isRelayed: Bool { state.withLock { $0.backendPID != nil && $0.isRelayed } }
    /// Whether this listener hosts its host's relay.
    var hostsRelay: Bool { state.withLock { $0.hostedRelay != nil } }
    /// Whether the relay this listener follows paces its notifications (`ListenerLoop.quietPace`).
    var isPaced: Bool { state.withLock { $0.isPaced } }

    /// How many times the listener has reconnected after losing its session.
    var reconnects: Int { state.withLock { $0.reconnects } }
    /// How many times the listener tried to prune (whether or not it got the lock).
    var pruneAttempts: Int { state.withLock { $0.pruneAttempts } }

    /// Adds a batch observer and starts listening if not yet started. With `wants`, it
    /// wants records only while that holds; while none does, notifications' changes go
    /// unread (the headers still move the position) and their records to no observer.
    func add(_ observer: @escaping @Sendable ([ChangeRecord]) -> Void, wants: (@Sendable () -> Bool)? = nil) -> Int {
        register { state, id in (state.observers[id], state.wants[id]) = (observer, wants) }
    }

    /// Whether an observer wants records now (one with no predicate always does).
    private func wantsRecords() -> Bool {
        state.withLock { state in state.observers.keys.contains { state.wants[$0]?() ?? true } }
    }

    /// Whether notifications can wait (`ListenerLoop.quietPace`): no waker is registered
    /// and no observer wants records.
    private func notificationsCanWait() -> Bool { state.withLock { $0.wakers.isEmpty } && !wantsRecords() }

    /// Adds a waker (see `State.wakers`) and starts listening if not yet started: once
    /// this returns, every later commit of a change record wakes it (or the reconnection
    /// after a dropped session does).
    func addWaker(_ waker: @escaping @Sendable () -> Void) -> Int {
        register { state, id in state.wakers[id] = waker }
    }

    /// Stores an observer or waker under a new id (`store`), starting the listener if it
    /// is neither running nor stopping.
    private func register(_ store: (inout State, Int) -> Void) -> Int {
        let (id, mustStart) = state.withLock { state -> (Int, Bool) in
            let id = state.nextObserverID
            state.nextObserverID += 1
            store(&state, id)
            let mustStart = !state.isRunning && !state.isStopping
            if mustStart { state.isRunning = true }
            return (id, mustStart)
        }
        if mustStart { start() }
        return id
    }

    func remove(_ id: Int) {
        state.withLock { state in
            state.observers.removeValue(forKey: id)
            state.wants.removeValue(forKey: id)
            state.wakers.removeValue(forKey: id)
        }
    }

    /// Calls the wakers.
    private func wake() {
        let wakers = state.withLock { Array($0.wakers.values) }
        for waker in wakers { waker() }
    }

    /// Stops the thread and waits for it to end (it closes its connection).
    func stop() {
        let wasRunning = state.withLock { state -> Bool in
            let wasRunning = state.isRunning && !state.isStopping
            state.isStopping = true
            return wasRunning
        }
        guard wasRunning else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        // Called from an observer on the listener's own thread (the last reference to the
        // coordinator went away there): the loop ends after the observer returns.
        if let thread = state.withLock({ $0.thread }), pthread_equal(thread, pthread_self()) != 0 { return }
        finished.wait()
    }

    private var isStopping: Bool { state.withLock { $0.isStopping } }

    // MARK: - The listening thread

    /// Connects, `LISTEN`s, takes the start position — all before returning, so nothing
    /// committed after this call is missed — then serves on a thread of its own. When the
    /// first connection fails the thread keeps trying and starts from the position of its
    /// first successful connection.
    private func start() {
        var opening: Opening?
        do {
            let (session, kind) = try connect(throughRelay: options.relay.effectiveDirectory != nil)
            do {
                opening = Opening(
                    session: session, kind: kind, position: try ChangeLog.currentPosition(on: session.connection))
            } catch {
                session.close()
                throw error
            }
        } catch {
            logger.error("change listener could not connect yet, retrying: \(error)")
        }
        let thread = Thread { [self, opening] in
            state.withLock { $0.thread = pthread_self() }
            run(from: opening)
            let relay = state.withLock { state -> NotificationRelay? in
                defer { state.hostedRelay = nil }
                return state.hostedRelay
            }
            relay?.stop()
            finished.signal()
        }
        thread.name = "pgdatakit.listener"
        thread.start()
    }

    /// The session `start()` opened, and its position, handed to the listening thread.
    private struct Opening: Sendable {
        let session: ListenerSession
        let kind: ListenerStateMachine.SessionKind
        let position: String
    }

    /// A session that receives the change log's notifications: through the host's relay
    /// when `throughRelay` and one serves (or this listener can host it), else its own
    /// `LISTEN`; with what the relay answered.
    private func connect(throughRelay: Bool) throws -> (ListenerSession, ListenerStateMachine.SessionKind) {
        var answer = ListenerStateMachine.RelayAnswer.notTried
        if throughRelay {
            switch connectThroughRelay() {
            case .session(let session):
                let hosting = state.withLock { state -> Bool in
                    state.isRelayed = true
                    return state.hostedRelay.map { !$0.hasEnded } ?? false
                }
                if case .relayed(let client, _) = session { notifier.route(through: hosting ? nil : client) }
                return (session, .relayed(hosting: hosting))
            case .unavailable(let reason):
                answer = reason
            }
        }
        let connection = try Connection(configuration.named(Self.applicationName), logger: logger)
        do {
            try connection.listen(ChangeLog.channel)
            try sessionCheck?.verify(connection)
        } catch {
            connection.close()
            throw error
        }
        let pid = connection.backendPID
        state.withLock {
            $0.backendPID = pid
            $0.isRelayed = false
        }
        notifier.route(through: nil)
        return (.direct(connection), .direct(relay: answer))
    }

    /// What trying the host's relay gave.
    private enum RelayAttempt {
        /// A session following the relay.
        case session(ListenerSession)
        /// No relay for this session, and why (`ListenerStateMachine` decides when to
        /// try again).
        case unavailable(ListenerStateMachine.RelayAnswer)
    }

    /// Follows the host's relay, hosting it first when none serves (after logging why
    /// not, when it cannot be used). A relay that is changing hands (its host just ended:
    /// a connection reset, no answer yet) is tried again for up to two seconds; past
    /// that, or on another transient failure, the answer is `later` (the listener uses
    /// its own `LISTEN` and tries the relay again `options.relayRetryDelay` later).
    private func connectThroughRelay() -> RelayAttempt {
        guard let directory = options.relay.effectiveDirectory else { return .unavailable(.notTried) }
        let endpoint: NotificationRelayEndpoint
        do {
            guard
                let made = try NotificationRelayEndpoint(
                    configuration: configuration, channel: ChangeLog.channel, directory: directory)
            else { return .unavailable(.notTried) }
            endpoint = made
        } catch {
            logger.debug("listening on this process's own session: the relay's directory cannot be used: \(error)")
            return .unavailable(.notTried)
        }
        let deadline = ContinuousClock.now + .seconds(2)
        var problem: (any Error)?
        while ContinuousClock.now < deadline, !isStopping {
            do {
                if let relay = try NotificationRelayClient.connect(to: endpoint, channel: ChangeLog.channel, timeout: .seconds(2)) {
                    // Registered with the relay: every notification from here on reaches
                    // this process, so the position taken next misses nothing.
                    let connection = try Connection(configuration.named(Self.applicationName), logger: logger)
                    let pid = connection.backendPID
                    state.withLock { $0.backendPID = pid }
                    return .session(.relayed(relay, connection))
                }
                if let ended = state.withLock({ $0.hostedRelay?.hasEnded == true ? $0.hostedRelay : nil }) {
                    // (Its thread gave up; its lock is free again.)
                    ended.stop()
                    state.withLock { $0.hostedRelay = nil }
                }
                if state.withLock({ $0.hostedRelay == nil }), let lock = try endpoint.tryLock() {
                    let relay = try NotificationRelay.hosted(
                        endpoint, lock: lock, configuration: configuration.named(Self.relayApplicationName),
                        logger: logger, notifier: notifier)
                    state.withLock { $0.hostedRelay = relay }
                    continue
                }
            } catch let failure as LocalSocket.Failure where failure.code == EPROTO {
                // Another key, an unreadable stream, a session through a pooler: this
                // will not change by waiting.
                logger.debug("listening on this process's own session, not through the host's relay: \(failure)")
                return .unavailable(.refused)
            } catch {
                problem = error
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        logger.debug(
            "no notification relay answered in time; listening on this process's own session for now\(problem.map { ": \($0)" } ?? "")")
        return .unavailable(.later)
    }

    /// The listening thread's loop: asks the state machine what to do, does it, and tells
    /// it what happened, until stopped.
    private func run(from opening: Opening?) {
        var machine = ListenerStateMachine(
            timing: ListenerStateMachine.Timing(
                reconnectDelay: options.reconnectDelay, maximumReconnectDelay: options.maximumReconnectDelay,
                pruneInterval: options.pruneInterval, quietReadDelay: Self.quietReadDelay,
                relayRetryDelay: options.relayRetryDelay, unannouncedCheckInterval: options.unannouncedCheckInterval),
            prunes: prunes, relay: options.relay.effectiveDirectory == nil ? .off : .on, now: .now)
        var loop = ListenerLoop()
        if let opening {
            machine.connected(opening.kind, now: .now)
            machine.positioned(now: .now)
            loop.session = opening.session
            loop.passesOn = hostedRelay(for: opening.kind)
            loop.feed = ChangeFeedPosition(snapshot: opening.position)
        }
        defer { closeSession(&loop) }
        while true {
            if isStopping { machine.stopRequested() }
            let action = machine.next(now: .now)
            if action == .stop { return }
            do {
                try perform(action, machine: &machine, loop: &loop)
            } catch {
                if isStopping { continue }
                closeSession(&loop)
                let reconnect = machine.failed(error is LocalSocket.Failure ? .relayWentAway : .sessionLost, now: .now)
                switch reconnect {
                case .atOnce:
                    // The host's relay went away (its process ended, its session dropped,
                    // or this process fell behind): an ordinary handover. The catch-up
                    // brings what passed meanwhile.
                    logger.info("the host's notification relay went away; reconnecting and catching up: \(error)")
                case .after(let delay):
                    logger.warning("change listener lost its connection, reconnecting in \(delay): \(error)")
                }
            }
        }
    }

    /// Closes the loop's session: this process's notifications no longer go through its
    /// relay, and there is no backend to report.
    private func closeSession(_ loop: inout ListenerLoop) {
        notifier.route(through: nil)
        loop.session?.close()
        loop.session = nil
        loop.passesOn = nil
        loop.paced = false
        state.withLock {
            $0.isPaced = false
            $0.backendPID = nil
        }
    }

    /// The relay a session of `kind` follows when this process hosts it.
    private func hostedRelay(for kind: ListenerStateMachine.SessionKind) -> NotificationRelay? {
        kind == .relayed(hosting: true) ? state.withLock { $0.hostedRelay } : nil
    }

    /// Does one action of the state machine and reports its outcome to it.
    private func perform(_ action: ListenerStateMachine.Action, machine: inout ListenerStateMachine, loop: inout ListenerLoop) throws {
        switch action {
        case .stop:
            return
        case .sleep(let duration):
            sleepUnlessWoken(duration)
        case .connect(let throughRelay):
            let (session, kind) = try connect(throughRelay: throughRelay)
            loop.session = session
            loop.passesOn = hostedRelay(for: kind)
            machine.connected(kind, now: .now)
        case .closeToRetryRelay:
            // Try the host's relay again: reconnect (through it, if it answers now) and
            // catch up from the position, as after a lost session.
            closeSession(&loop)
        case .takePosition, .catchUp, .readLog, .checkLog, .prune, .wait:
            guard let session = loop.session else {
                throw PostgresError(kind: .connectionLost, message: "the change listener has no session")
            }
            try perform(action, on: session, machine: &machine, feed: &loop.feed, passingOn: loop.passesOn)
            if case .wait = action, try loop.pace(quiet: notificationsCanWait()) {
                state.withLock { $0.isPaced = loop.paced }
            }
        }
    }

    /// Does an action that needs the session; `relay` is the relay this process hosts and
    /// the session follows, if it does.
    private func perform(
        _ action: ListenerStateMachine.Action, on session: ListenerSession, machine: inout ListenerStateMachine,
        feed: inout ChangeFeedPosition?, passingOn relay: NotificationRelay?
    ) throws {
        let current = session.connection
        if action == .takePosition || action == .catchUp {
            if action == .catchUp, let last = feed {
                state.withLock { $0.reconnects += 1 }
                logger.debug("change listener reconnected; catching up")
                feed = try catchUp(on: current, from: last, passingOn: relay)
            } else {
                feed = ChangeFeedPosition(snapshot: try ChangeLog.currentPosition(on: current))
            }
            // Notifications sent while there was no session are gone.
            wake()
            machine.positioned(now: .now)
            return
        }
        guard var position = feed else { return }
        // `position` owns the delivered set while it grows (a copy still held by `feed`
        // made every insert copy the whole set), and is what the listener stands at
        // however this action ends: a read that fails after payloads were handed on must
        // not reconnect from before them (they would be delivered again).
        feed = nil
        defer { feed = position }
        switch action {
        case .wait(let timeout):
            guard let arrival = try session.next(timeout: timeout, wake: wakeRead), !isStopping else { return }
            let arrived = ContinuousClock.now
            let compact = try handle(arrival, position: &position, on: current, passingOn: relay)
            if !arrival.notifications.isEmpty { machine.notificationsHandled(compact: compact, now: arrived) }
            if arrival.position != nil { machine.hostPassedOn(compact: compact, now: arrived) }
        case .readLog:
            position = try catchUp(on: current, from: position, passingOn: relay)
            machine.logRead(now: .now)
        case .checkLog:
            // Payloads delivered since the last read are records after the position
            // anyway; otherwise one statement says whether a read would find any. (The
            // host of the relay checks for every process of the host: its own records
            // too, whose notifications its process may have failed to send.)
            let hasNew =
                !position.delivered.isEmpty || position.confirmsOwn(followers: relay?.followerCount ?? 0)
                ? true
                : try ChangeLog.hasRecords(
                    after: position.snapshot, skippingOrigin: relay == nil ? origin : nil, excluding: position.ownLiteral,
                    on: current)
            if hasNew {
                position = try catchUp(on: current, from: position, passingOn: relay)
            } else {
                // Nothing new: the position again, so the followers know the checks go on.
                let unchanged = ChangeFeedPosition.relayedPosition(of: position.snapshot, readFrom: position.snapshot)
                relay?.passOn([], position: unchanged)
            }
            machine.logRead(now: .now)
        case .prune:
            machine.pruned(permitted: try prune(on: current))
        case .takePosition, .catchUp, .connect, .closeToRetryRelay, .sleep, .stop:
            break
        }
    }

    /// Hands on the records of notifications that arrived, reading the log where a
    /// payload does not carry its record, and moves the position on (to the position the
    /// relay's host passed on, when it is as far: `ChangeFeedPosition.adopt(relayed:)`).
    ///
    /// - Parameter relay: the relay this process hosts and the session follows, if so.
    /// - Returns: whether the delivered set is compact (the log was read last, or no
    ///   payload delivered anything), so no quiet read is needed.
    private func handle(
        _ arrival: ListenerArrival, position: inout ChangeFeedPosition, on current: Connection,
        passingOn relay: NotificationRelay?
    ) throws -> Bool {
        var records: [ChangeRecord] = []
        var readLast = false
        // (While no observer wants records — a writer that never read its main context —
        // only each notification's header is read: every process of a host reads every save's.)
        let readsChanges = wantsRecords()
        func deliver(_ records: [ChangeRecord]) { self.deliver(records, changesRead: readsChanges) }
        for payload in ChangeLog.separated(arrival.notifications) {  // (a notification may carry several)
            switch ChangeLog.payload(of: payload, ownOrigin: origin, readsChanges: readsChanges) {
            case .own(let transaction):
                // The relay's host notes its own: its reads take in every origin, and
                // pass on what no notification announced.
                if relay != nil, !position.covers(transaction) { position.noteOwn(transaction) }
                continue
            case .record(let record, let transaction):
                readLast = false
                // (Another process's: this one's own come as `.own`.) A writer's
                // snapshot does not move the position: notifications are sent after
                // their commits, so one covering a transaction can come before that
                // transaction's own (`ChangeFeedPosition`).
                if !position.covers(transaction) {
                    position.noteDelivered(transaction)
                    records.append(record)
                }
            case .reference(let id):
                // A record too large for its notification (or an older writer's):
                // read the log, after handing on what came before, in order. (Every
                // process of the host got this notification: the relay's host need not
                // pass the record on.)
                if relay != nil { position.noteAnnounced(id) }
                if ownRecords.take(id) {
                    readLast = false
                    continue
                }
                deliver(records)
                records = []
                position = try catchUp(on: current, from: position, passingOn: relay)
                readLast = true
            case .unreadable:
                deliver(records)
                records = []
                position = try catchUp(on: current, from: position, passingOn: relay)
                readLast = true
            }
        }
        deliver(records)
        wake()
        // (A host's position this one cannot adopt calls for a read of its own.)
        var adopted = true
        if relay == nil, let hosts = arrival.position { adopted = position.adopt(relayed: hosts) }
        if position.delivered.count + position.ownAnnounced.count >= Self.maximumDelivered {
            position = try catchUp(on: current, from: position, passingOn: relay)
            readLast = true
        }
        // Payloads do not move the position: once notifications go quiet, one read moves
        // it past what they delivered and empties the set.
        let confirmsOwn = position.confirmsOwn(followers: relay?.followerCount ?? 0)
        return readLast || (position.delivered.isEmpty && !confirmsOwn && adopted)
    }

    /// Deletes records older than the retention. A role without the `DELETE` grant is
    /// told once, and the listener stops pruning instead of treating it as a lost
    /// connection.
    ///
    /// - Returns: whether the role may prune.
    private func prune(on connection: Connection) throws -> Bool {
        do {
            let pruned = try ChangeLog.prune(
                olderThan: options.retention, maximumReaderAge: options.maximumHistoryReaderAge, on: connection,
                logger: logger)
            state.withLock { $0.pruneAttempts += 1 }
            if let pruned, pruned > 0 { logger.debug("pruned \(pruned) change records") }
            return true
        } catch let error as PostgresError where error.sqlState == .insufficientPrivilege {
            state.withLock { $0.pruneAttempts += 1 }
            logger.warning(
                "pruning the change log is not permitted, so this process stops pruning (it needs DELETE on \(ChangeLog.table) and SELECT, UPDATE on \(ChangeLog.readersTable) and \(ChangeLog.horizonTable)): \(error)")
            return false
        }
    }

    /// Hands records to the observers (nothing for none); records whose changes went
    /// unread (`changesRead` false) are counted and handed to none.
    private func deliver(_ records: [ChangeRecord], changesRead: Bool = true) {
        guard !records.isEmpty else { return }
        metrics.received(records, label: PGDataKitMetrics.remoteChanges, latency: PGDataKitMetrics.listenerLag)
        guard changesRead else { return }
        let observers = state.withLock { Array($0.observers.sorted { $0.key < $1.key }.map(\.value)) }
        for observer in observers { observer(records) }
    }

    /// Reads what committed since `position` and was not delivered yet, hands it to the
    /// observers, returns the new position.
    ///
    /// The relay's host (`relay`) reads the records of every origin, this process's own
    /// included (they are not handed on here), and passes on to the relay's other
    /// processes every record its read found — records no notification had announced
    /// (their process died before sending it, or has not sent it yet), except those
    /// announced by id — then the new position, which they adopt in place of reading
    /// the log themselves.
    private func catchUp(
        on connection: Connection, from position: ChangeFeedPosition, passingOn relay: NotificationRelay?
    ) throws -> ChangeFeedPosition {
        let (entries, next) = try ChangeLog.readEntries(
            after: position.snapshot, skippingOrigin: relay == nil ? origin : nil,
            delivered: position.deliveredLiteral, leavingLargeRecordsOf: relay == nil ? nil : origin, on: connection)
        let records = entries.compactMap(\.record)
        guard let relay else {
            deliver(records)
            return ChangeFeedPosition(snapshot: next)
        }
        deliver(records.filter { $0.origin != origin })
        var payloads: [String] = []
        for entry in entries where !position.announced.contains(entry.id) {
            payloads.append(entry.record.flatMap { try? ChangeLog.payload(of: $0) } ?? String(entry.id))
        }
        relay.passOn(payloads, position: ChangeFeedPosition.relayedPosition(of: next, readFrom: position.snapshot))
        return ChangeFeedPosition(snapshot: next)
    }

    private func sleepUnlessWoken(_ duration: Duration) {
        _ = try? LocalSocket.poll([(wakeRead, Int16(POLLIN))], timeout: duration)
    }
}
