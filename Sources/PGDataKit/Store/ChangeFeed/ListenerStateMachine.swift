/// The decisions of a change listener, without I/O: when to connect, how to take its
/// position on a new session, when to wait and for how long, when to read the log after
/// payloads went quiet, when to prune, when to leave its own session to try the host's
/// relay again, and how long to back off after losing a session.
///
/// `ChangeListener`'s thread asks `next(now:)` what to do, does it (the libpq and socket
/// calls stay there) and reports what happened (`connected(_:now:)`, `positioned(now:)`,
/// `notificationsHandled(compact:now:)`, `logRead(now:)`, `pruned(permitted:)`,
/// `failed(_:now:)`, `stopRequested()`). Time comes in as an argument, so every
/// transition can be played without a server or a clock. For example, a session that
/// connects, takes its position, then drops:
///
/// ```swift
/// var machine = ListenerStateMachine(timing: timing, prunes: false, relay: .off, now: t0)
/// machine.next(now: t0)                          // .connect(throughRelay: false)
/// machine.connected(.direct(relay: .notTried), now: t0)
/// machine.next(now: t0)                          // .takePosition
/// machine.positioned(now: t0)
/// machine.next(now: t0)                          // .wait(timeout: 60 s)
/// machine.failed(.sessionLost, now: t0)          // .after(50 ms)
/// machine.next(now: t0)                          // .sleep(50 ms)
/// machine.next(now: t0 + .milliseconds(50))      // .connect(throughRelay: false)
/// ```
struct ListenerStateMachine {
    /// The durations the machine decides with.
    struct Timing: Equatable {
        /// The first wait before reconnecting; it doubles per failure.
        var reconnectDelay: Duration
        /// The longest wait between reconnection attempts.
        var maximumReconnectDelay: Duration
        /// How often to prune, while pruning is permitted.
        var pruneInterval: Duration
        /// How long notifications must be quiet before a read of the log confirms the
        /// payloads delivered since the last read.
        var quietReadDelay: Duration
        /// How long a listener that fell back to its own session waits before it tries
        /// the host's relay again.
        var relayRetryDelay: Duration
        /// The longest single wait for notifications.
        var longestWait: Duration = .seconds(60)
        /// How long after the last read of the log the listener checks it for records no
        /// notification announced (`nil`: never). A listener that follows a relay hosted
        /// by another process leaves the checks to that process while its positions come
        /// (`hostSilence`).
        var unannouncedCheckInterval: Duration?
        /// How long notifications must be quiet before a listener that follows a relay
        /// hosted by another process reads the log itself: the hosting process's reads
        /// pass their position on to it (`ChangeFeedPosition.adopt(relayed:)`) well before, so
        /// this is a fallback (a host whose options read less often, say).
        var followerQuietReadDelay: Duration = .seconds(3)

        /// How long a follower of another process's relay goes without a position from
        /// that process (`hostPassedOn(compact:now:)`) before it checks the log itself:
        /// three check intervals. The hosting process passes one on after each check and
        /// each read, so only a host that stopped checking is silent that long (its
        /// listener lost its session and waits to reconnect, or listens on a session of
        /// its own).
        var hostSilence: Duration? { unannouncedCheckInterval.map { $0 * 3 } }
    }

    /// Whether the host's relay is to be tried.
    enum Relay: Equatable {
        /// The options turned it off: every session is the listener's own.
        case off
        /// Try it on every connection (until it refuses).
        case on
        /// It refused for a reason that does not pass (another key, a pooler): never
        /// tried again.
        case refused
    }

    /// How a new session gets its notifications.
    enum SessionKind: Equatable {
        /// From the host's relay; `hosting` when this process hosts that relay (it then
        /// checks the log for the host and passes on what its reads find).
        case relayed(hosting: Bool)
        /// On its own `LISTEN`; `relay` says what the relay answered, if it was tried.
        case direct(relay: RelayAnswer)
    }

    /// What the host's relay answered when a connection tried it.
    enum RelayAnswer: Equatable {
        /// Not tried (off, refused) or not usable here (no safe directory).
        case notTried
        /// It will not work for this listener, not now and not later.
        case refused
        /// Nothing answered in time (the relay was changing hands, say): try again
        /// `relayRetryDelay` later.
        case later
    }

    /// Why a session (or an attempt to open one) ended.
    enum Failure: Equatable {
        /// The host's relay went away: an ordinary handover, reconnected at once the
        /// first time.
        case relayWentAway
        /// Anything else: the session dropped, the server refused, a read failed.
        case sessionLost
    }

    /// When the next connection attempt goes, as decided by `failed(_:now:)`.
    enum Reconnect: Equatable {
        /// At once (the relay changed hands).
        case atOnce
        /// After this backoff.
        case after(Duration)
    }

    /// What the listener does next.
    enum Action: Equatable {
        /// Open a session (through the host's relay first when `throughRelay`), then
        /// report `connected(_:now:)` or `failed(_:now:)`.
        case connect(throughRelay: Bool)
        /// Take the log's current position on the new session (the listener's first):
        /// then `positioned(now:)`.
        case takePosition
        /// Read what committed since the position on the new session and hand it on
        /// (a reconnection: count it), then `positioned(now:)`.
        case catchUp
        /// Wait up to `timeout` for notifications; report what arrived with
        /// `notificationsHandled(compact:now:)` (nothing arriving needs no report).
        case wait(timeout: Duration)
        /// Read the log to confirm payloads delivered since the last read, then
        /// `logRead()`.
        case readLog
        /// Check the log for records committed since the position that no notification
        /// announced, and read it when there are; then `logRead(now:)`.
        case checkLog
        /// Prune old records, then `pruned(permitted:)`.
        case prune
        /// Close the session (the listener's own) to connect through the host's relay
        /// again; the next action is a connection.
        case closeToRetryRelay
        /// Sleep for this long (unless stopped) before connecting again.
        case sleep(Duration)
        /// Close the session and end.
        case stop
    }

    /// Where the listener is.
    private enum Phase: Equatable {
        /// No session; the next connection attempt is due at `reconnectAt` (at once for
        /// `nil`).
        case disconnected(reconnectAt: Moment?)
        /// A connection attempt is under way.
        case connecting
        /// A session of `kind`; `positioned` once the position was taken or caught up on it.
        case connected(SessionKind, positioned: Bool)
        /// Stopped: nothing more to do.
        case stopped
    }

    /// A point in time as the machine keeps it: how long after `epoch` (the instant it
    /// was made at). `ContinuousClock.Instant` is a resilient type: optional ones were
    /// copied, compared and destroyed through generic value witnesses (`nextOnSession`
    /// took about 1,050 instructions a call, 285 now: callgrind, `scripts/instructions
    /// save`); a `Duration` is handled inline. Each call turns its `now` into one once.
    typealias Moment = Duration

    /// The durations in use.
    let timing: Timing
    /// The instant the machine was made at: `Moment`s count from it.
    private let epoch: ContinuousClock.Instant
    private var phase: Phase = .disconnected(reconnectAt: nil)
    /// Whether the relay is tried on the next connection.
    private(set) var relay: Relay
    /// Whether this listener prunes (until the role turns out not to be permitted to).
    private(set) var prunes: Bool
    /// Whether a position was ever taken (later sessions catch up from it).
    private(set) var hasPosition = false
    /// The backoff of the next failure.
    private(set) var delay: Duration
    /// When the last prune was started; `nil` before the first (due at once).
    private var lastPrune: Moment?
    /// Since when notifications came that no read of the log has covered (payloads
    /// delivered while the position's delivered set grew), if any.
    private var unreadSince: Moment?
    /// When the last notifications arrived.
    private var lastNotification: Moment
    /// When the log was last read or checked (or the position taken).
    private var lastRead: Moment
    /// When the process hosting the followed relay last passed on a position (or the
    /// session following it began).
    private var lastHostPosition: Moment
    /// When a listener on its own session tries the relay again, if it will.
    private var relayRetryMoment: Moment?
    /// When a listener on its own session tries the relay again, if it will.
    var relayRetryAt: ContinuousClock.Instant? { relayRetryMoment.map { epoch + $0 } }
    /// Whether a stop was asked for.
    private var stopping = false

    /// A listener with no session yet.
    ///
    /// - Parameters:
    ///   - prunes: whether this process prunes (its options and role allow it).
    ///   - relay: `.on` when the options turn the host's relay on, else `.off`.
    init(timing: Timing, prunes: Bool, relay: Relay, now: ContinuousClock.Instant) {
        self.timing = timing
        self.prunes = prunes
        self.relay = relay
        self.delay = timing.reconnectDelay
        self.epoch = now
        self.lastNotification = .zero
        self.lastRead = .zero
        self.lastHostPosition = .zero
    }

    /// `now` as a `Moment`.
    private func moment(_ now: ContinuousClock.Instant) -> Moment { epoch.duration(to: now) }

    /// What to do now.
    mutating func next(now instant: ContinuousClock.Instant) -> Action {
        if stopping { return .stop }
        let now = moment(instant)
        switch phase {
        case .stopped:
            return .stop
        case .disconnected(let reconnectAt):
            if let reconnectAt, now < reconnectAt { return .sleep(reconnectAt - now) }
            phase = .connecting
            return .connect(throughRelay: relay == .on)
        case .connecting:
            return .connect(throughRelay: relay == .on)
        case .connected(_, positioned: false):
            return hasPosition ? .catchUp : .takePosition
        case .connected(let kind, positioned: true):
            return nextOnSession(kind, now: now)
        }
    }

    /// The next step on a positioned session: a relay retry that is due, a quiet read,
    /// a prune, or else a wait until the first of them falls due.
    private mutating func nextOnSession(_ kind: SessionKind, now: Moment) -> Action {
        if case .direct = kind, let retryAt = relayRetryMoment, retryAt <= now {
            relayRetryMoment = nil
            phase = .disconnected(reconnectAt: nil)
            return .closeToRetryRelay
        }
        // A follower of another process's relay leaves the checks to that process while
        // its positions come, and waits longer before a quiet read of its own (the
        // host's reads move it on).
        let follows = kind == .relayed(hosting: false)
        let quietDelay = follows ? timing.followerQuietReadDelay : timing.quietReadDelay
        let sinceHostPosition = now - lastHostPosition
        let hostChecks = follows && timing.hostSilence.map { sinceHostPosition < $0 } ?? false
        let checkInterval = hostChecks ? nil : timing.unannouncedCheckInterval
        let sinceNotification = now - lastNotification
        if unreadSince != nil, sinceNotification >= quietDelay { return .readLog }
        let sinceRead = now - lastRead
        if let interval = checkInterval, sinceRead >= interval { return .checkLog }
        if prunes, lastPrune.map({ now - $0 >= timing.pruneInterval }) ?? true {
            lastPrune = now
            return .prune
        }
        var timeout = timing.longestWait
        if prunes, let lastPrune { timeout = min(timeout, timing.pruneInterval - (now - lastPrune)) }
        if unreadSince != nil { timeout = min(timeout, quietDelay - sinceNotification) }
        if let interval = checkInterval { timeout = min(timeout, interval - sinceRead) }
        if hostChecks, let silence = timing.hostSilence { timeout = min(timeout, silence - sinceHostPosition) }
        if case .direct = kind, let retryAt = relayRetryMoment { timeout = min(timeout, retryAt - now) }
        return .wait(timeout: max(.milliseconds(1), timeout))
    }

    /// A connection attempt opened a session of `kind`.
    mutating func connected(_ kind: SessionKind, now instant: ContinuousClock.Instant) {
        guard phase != .stopped else { return }
        let now = moment(instant)
        phase = .connected(kind, positioned: false)
        switch kind {
        case .relayed:
            relayRetryMoment = nil
            lastHostPosition = now
        case .direct(.notTried):
            break
        case .direct(.refused):
            relayRetryMoment = nil
            relay = .refused
        case .direct(.later):
            relayRetryMoment = now + timing.relayRetryDelay
        }
    }

    /// The new session's position was taken or caught up: the listener serves, and the
    /// backoff starts from the first delay again.
    mutating func positioned(now: ContinuousClock.Instant) {
        guard case .connected(let kind, positioned: false) = phase else { return }
        phase = .connected(kind, positioned: true)
        hasPosition = true
        delay = timing.reconnectDelay
        unreadSince = nil
        lastRead = moment(now)
    }

    /// Notifications arrived and were handed on; `compact` when the position needs no
    /// read of the log to confirm them (it was just read, or nothing was delivered from
    /// payloads since).
    mutating func notificationsHandled(compact: Bool, now instant: ContinuousClock.Instant) {
        let now = moment(instant)
        lastNotification = now
        unreadSince = compact ? nil : (unreadSince ?? now)
    }

    /// A position from the process hosting the followed relay arrived: that process is
    /// checking the log for the host (see `Timing.hostSilence`). `compact` as for
    /// `notificationsHandled(compact:now:)`: false when the position was not adopted, or
    /// payloads delivered since are still to be confirmed, so a quiet read is due. (The
    /// position is no notification: it does not put a quiet read off.)
    mutating func hostPassedOn(compact: Bool, now instant: ContinuousClock.Instant) {
        let now = moment(instant)
        lastHostPosition = now
        unreadSince = compact ? nil : (unreadSince ?? now)
    }

    /// The quiet read of the log (`readLog`) or the check (`checkLog`) is done.
    mutating func logRead(now: ContinuousClock.Instant) {
        unreadSince = nil
        lastRead = moment(now)
    }

    /// A prune ended; `permitted` false when the role may not prune (the listener stops
    /// trying).
    mutating func pruned(permitted: Bool) {
        if !permitted { prunes = false }
    }

    /// The session, or the attempt to open one, failed: the next attempt goes at once
    /// when the relay changed hands (the first time in a row), otherwise after the
    /// backoff, which doubles up to its maximum either way.
    @discardableResult
    mutating func failed(_ failure: Failure, now: ContinuousClock.Instant) -> Reconnect {
        guard phase != .stopped, !stopping else { return .atOnce }
        let reconnect: Reconnect =
            failure == .relayWentAway && delay == timing.reconnectDelay ? .atOnce : .after(delay)
        switch reconnect {
        case .atOnce: phase = .disconnected(reconnectAt: nil)
        case .after(let wait): phase = .disconnected(reconnectAt: moment(now) + wait)
        }
        delay = min(delay * 2, timing.maximumReconnectDelay)
        return reconnect
    }

    /// The listener is asked to stop: every later action is `stop`.
    mutating func stopRequested() {
        stopping = true
        phase = .stopped
    }
}
