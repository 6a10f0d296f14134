import Testing

@testable import PGDataKit

/// The change listener's decisions, one transition at a time, with no server and no
/// clock: each test plays what the listening thread would report and checks what the
/// machine answers.
@Suite("ListenerStateMachine without a server")
struct ListenerStateMachineTests {
    typealias Machine = ListenerStateMachine

    /// The instant the tests count from.
    let t0 = ContinuousClock.now

    /// The durations of the tests: the library's defaults, but pruning every 10 minutes
    /// (shorter than the longest wait would hide nothing) and relay retries after 30 s.
    let timing = Machine.Timing(
        reconnectDelay: .milliseconds(50), maximumReconnectDelay: .seconds(5), pruneInterval: .seconds(600),
        quietReadDelay: .seconds(1), relayRetryDelay: .seconds(30))

    /// A machine that connected with `kind` at `t0` and took its position there.
    func serving(_ kind: Machine.SessionKind = .direct(relay: .notTried), prunes: Bool = false, relay: Machine.Relay = .off)
        -> Machine
    {
        var machine = Machine(timing: timing, prunes: prunes, relay: relay, now: t0)
        _ = machine.next(now: t0)
        machine.connected(kind, now: t0)
        _ = machine.next(now: t0)
        machine.positioned(now: t0)
        return machine
    }

    @Test func theFirstSessionTakesThePositionThenWaits() {
        var machine = Machine(timing: timing, prunes: false, relay: .off, now: t0)
        #expect(machine.next(now: t0) == .connect(throughRelay: false))
        machine.connected(.direct(relay: .notTried), now: t0)
        #expect(machine.next(now: t0) == .takePosition)
        machine.positioned(now: t0)
        #expect(machine.hasPosition)
        #expect(machine.next(now: t0) == .wait(timeout: .seconds(60)))
    }

    @Test func anOpeningThatAskedTwiceStillConnects() {
        var machine = Machine(timing: timing, prunes: false, relay: .on, now: t0)
        #expect(machine.next(now: t0) == .connect(throughRelay: true))
        #expect(machine.next(now: t0) == .connect(throughRelay: true))
    }

    @Test func aLaterSessionCatchesUpFromThePosition() {
        var machine = serving()
        machine.failed(.sessionLost, now: t0)
        #expect(machine.next(now: t0 + .seconds(1)) == .connect(throughRelay: false))
        machine.connected(.direct(relay: .notTried), now: t0 + .seconds(1))
        #expect(machine.next(now: t0 + .seconds(1)) == .catchUp)
    }

    @Test func aFailedAttemptBeforeAnyPositionStillTakesOneLater() {
        var machine = Machine(timing: timing, prunes: false, relay: .off, now: t0)
        _ = machine.next(now: t0)
        #expect(machine.failed(.sessionLost, now: t0) == .after(.milliseconds(50)))
        #expect(machine.next(now: t0 + .seconds(1)) == .connect(throughRelay: false))
        machine.connected(.direct(relay: .notTried), now: t0 + .seconds(1))
        #expect(machine.next(now: t0 + .seconds(1)) == .takePosition)
    }

    @Test func theBackoffSleepsThenDoublesUpToItsMaximum() {
        var machine = serving()
        #expect(machine.failed(.sessionLost, now: t0) == .after(.milliseconds(50)))
        #expect(machine.next(now: t0) == .sleep(.milliseconds(50)))
        #expect(machine.next(now: t0 + .milliseconds(20)) == .sleep(.milliseconds(30)))
        #expect(machine.next(now: t0 + .milliseconds(50)) == .connect(throughRelay: false))
        var expected: [Duration] = []
        var delays: [Duration] = []
        var delay = Duration.milliseconds(100)
        for _ in 0..<10 {
            expected.append(delay)
            delay = min(delay * 2, .seconds(5))
            if case .after(let wait) = machine.failed(.sessionLost, now: t0) { delays.append(wait) }
            _ = machine.next(now: t0 + .seconds(10))
        }
        #expect(delays == expected)
        #expect(delays.last == .seconds(5))
    }

    @Test func aPositionedSessionResetsTheBackoff() {
        var machine = serving()
        machine.failed(.sessionLost, now: t0)
        _ = machine.next(now: t0 + .seconds(1))
        machine.failed(.sessionLost, now: t0 + .seconds(1))
        #expect(machine.delay == .milliseconds(200))
        _ = machine.next(now: t0 + .seconds(2))
        machine.connected(.direct(relay: .notTried), now: t0 + .seconds(2))
        _ = machine.next(now: t0 + .seconds(2))
        #expect(machine.delay == .milliseconds(200), "connected is not enough: the position must be caught up")
        machine.positioned(now: t0 + .seconds(2))
        #expect(machine.delay == .milliseconds(50))
    }

    @Test func theRelayGoingAwayReconnectsAtOnceTheFirstTimeInARow() {
        var machine = serving(.relayed(hosting: false), relay: .on)
        #expect(machine.failed(.relayWentAway, now: t0) == .atOnce)
        #expect(machine.next(now: t0) == .connect(throughRelay: true))
        #expect(machine.failed(.relayWentAway, now: t0) == .after(.milliseconds(100)))
        #expect(machine.next(now: t0) == .sleep(.milliseconds(100)))
    }

    @Test func aRefusingRelayIsNeverTriedAgain() {
        var machine = Machine(timing: timing, prunes: false, relay: .on, now: t0)
        #expect(machine.next(now: t0) == .connect(throughRelay: true))
        machine.connected(.direct(relay: .refused), now: t0)
        #expect(machine.relay == .refused)
        _ = machine.next(now: t0)
        machine.positioned(now: t0)
        #expect(machine.next(now: t0 + .seconds(3_600)) == .wait(timeout: .seconds(60)))
        machine.failed(.sessionLost, now: t0 + .seconds(3_600))
        #expect(machine.next(now: t0 + .seconds(3_601)) == .connect(throughRelay: false))
    }

    @Test func aRelayThatDidNotAnswerIsTriedAgainLater() {
        var machine = serving(.direct(relay: .later), relay: .on)
        #expect(machine.relayRetryAt == t0 + .seconds(30))
        #expect(machine.next(now: t0) == .wait(timeout: .seconds(30)))
        #expect(machine.next(now: t0 + .seconds(20)) == .wait(timeout: .seconds(10)))
        #expect(machine.next(now: t0 + .seconds(30)) == .closeToRetryRelay)
        #expect(machine.relayRetryAt == nil)
        #expect(machine.next(now: t0 + .seconds(30)) == .connect(throughRelay: true))
        machine.connected(.relayed(hosting: false), now: t0 + .seconds(30))
        #expect(machine.next(now: t0 + .seconds(30)) == .catchUp, "the position is kept: nothing missed, nothing twice")
        machine.positioned(now: t0 + .seconds(30))
        #expect(machine.next(now: t0 + .seconds(31)) == .wait(timeout: .seconds(60)))
    }

    @Test func aRelayedSessionClearsAPendingRetry() {
        var machine = serving(.direct(relay: .later), relay: .on)
        machine.failed(.sessionLost, now: t0)
        _ = machine.next(now: t0 + .seconds(1))
        machine.connected(.relayed(hosting: false), now: t0 + .seconds(1))
        #expect(machine.relayRetryAt == nil)
        _ = machine.next(now: t0 + .seconds(1))
        machine.positioned(now: t0 + .seconds(1))
        #expect(machine.next(now: t0 + .seconds(31)) == .wait(timeout: .seconds(60)))
    }

    @Test func compactNotificationsNeedNoRead() {
        var machine = serving()
        machine.notificationsHandled(compact: true, now: t0 + .seconds(1))
        #expect(machine.next(now: t0 + .seconds(5)) == .wait(timeout: .seconds(60)))
    }

    @Test func notificationsThatGrewTheSetAreReadOnceQuiet() {
        var machine = serving()
        machine.notificationsHandled(compact: false, now: t0)
        #expect(machine.next(now: t0) == .wait(timeout: .seconds(1)))
        machine.notificationsHandled(compact: false, now: t0 + .milliseconds(600))
        #expect(machine.next(now: t0 + .seconds(1)) == .wait(timeout: .milliseconds(600)), "quiet since the last one")
        #expect(machine.next(now: t0 + .milliseconds(1_600)) == .readLog)
        machine.logRead(now: t0 + .milliseconds(1_600))
        #expect(machine.next(now: t0 + .milliseconds(1_600)) == .wait(timeout: .seconds(60)))
    }

    @Test func aCompactBatchAfterAGrownOneCancelsTheRead() {
        var machine = serving()
        machine.notificationsHandled(compact: false, now: t0)
        machine.notificationsHandled(compact: true, now: t0 + .milliseconds(100))
        #expect(machine.next(now: t0 + .seconds(2)) == .wait(timeout: .seconds(60)))
    }

    @Test func aNewSessionForgetsUnreadNotifications() {
        var machine = serving()
        machine.notificationsHandled(compact: false, now: t0)
        machine.failed(.sessionLost, now: t0)
        _ = machine.next(now: t0 + .seconds(1))
        machine.connected(.direct(relay: .notTried), now: t0 + .seconds(1))
        _ = machine.next(now: t0 + .seconds(1))
        machine.positioned(now: t0 + .seconds(1))
        #expect(machine.next(now: t0 + .seconds(3)) == .wait(timeout: .seconds(60)), "the catch-up read the log")
    }

    @Test func thePrunerPrunesAtOnceThenEveryInterval() {
        var machine = serving(prunes: true)
        #expect(machine.next(now: t0) == .prune)
        machine.pruned(permitted: true)
        #expect(machine.next(now: t0) == .wait(timeout: .seconds(60)))
        #expect(machine.next(now: t0 + .seconds(590)) == .wait(timeout: .seconds(10)))
        #expect(machine.next(now: t0 + .seconds(600)) == .prune)
    }

    @Test func pruningGoesOnUnderConstantNotifications() {
        var machine = serving(prunes: true)
        _ = machine.next(now: t0)
        machine.pruned(permitted: true)
        var pruned = 0
        for tenth in 1...6_100 {
            let now = t0 + .milliseconds(100 * tenth)
            if machine.next(now: now) == .prune {
                pruned += 1
                machine.pruned(permitted: true)
            }
            machine.notificationsHandled(compact: true, now: now)
        }
        #expect(pruned == 1, "one more prune in 610 s of traffic, at 600 s")
    }

    @Test func aRoleThatMayNotPruneStopsPruning() {
        var machine = serving(prunes: true)
        #expect(machine.next(now: t0) == .prune)
        machine.pruned(permitted: false)
        #expect(!machine.prunes)
        #expect(machine.next(now: t0 + .seconds(3_600)) == .wait(timeout: .seconds(60)))
    }

    @Test func aNonPrunerNeverPrunes() {
        var machine = serving(prunes: false)
        #expect(machine.next(now: t0 + .seconds(86_400)) == .wait(timeout: .seconds(60)))
    }

    @Test func aDueRelayRetryComesBeforeAQuietReadAndAQuietReadBeforeAPrune() {
        var machine = serving(.direct(relay: .later), prunes: true, relay: .on)
        _ = machine.next(now: t0)
        machine.pruned(permitted: true)
        machine.notificationsHandled(compact: false, now: t0 + .seconds(1))
        let late = t0 + .seconds(700)
        #expect(machine.next(now: late) == .closeToRetryRelay)
        _ = machine.next(now: late)
        machine.connected(.direct(relay: .notTried), now: late)
        _ = machine.next(now: late)
        machine.positioned(now: late)
        machine.notificationsHandled(compact: false, now: late)
        #expect(machine.next(now: late + .seconds(2)) == .readLog)
        machine.logRead(now: late + .seconds(2))
        #expect(machine.next(now: late + .seconds(2)) == .prune)
    }

    @Test func theShortestDueTimeBoundsTheWait() {
        var machine = serving(.direct(relay: .later), prunes: true, relay: .on)
        _ = machine.next(now: t0)
        machine.pruned(permitted: true)
        #expect(machine.next(now: t0 + .seconds(5)) == .wait(timeout: .seconds(25)), "the relay retry, at 30 s")
        machine.notificationsHandled(compact: false, now: t0 + .seconds(5))
        #expect(machine.next(now: t0 + .milliseconds(5_400)) == .wait(timeout: .milliseconds(600)), "the quiet read")
        #expect(machine.next(now: t0 + .microseconds(5_999_999)) == .wait(timeout: .milliseconds(1)))
    }

    /// With a check interval, a listener that has not read the log for that long checks
    /// it (records whose notification never came), idle or busy; a read resets the time.
    @Test func theLogIsCheckedEveryIntervalIdleOrBusy() {
        var checking = timing
        checking.unannouncedCheckInterval = .seconds(1)
        var machine = Machine(timing: checking, prunes: false, relay: .off, now: t0)
        _ = machine.next(now: t0)
        machine.connected(.direct(relay: .notTried), now: t0)
        _ = machine.next(now: t0)
        machine.positioned(now: t0)
        #expect(machine.next(now: t0 + .milliseconds(300)) == .wait(timeout: .milliseconds(700)))
        #expect(machine.next(now: t0 + .seconds(1)) == .checkLog)
        machine.logRead(now: t0 + .seconds(1))
        #expect(machine.next(now: t0 + .seconds(1)) == .wait(timeout: .seconds(1)))
        // Notifications every 100 ms never go quiet, and the check still comes.
        var checks = 0
        for tenth in 11...40 {
            let now = t0 + .milliseconds(100 * tenth)
            if machine.next(now: now) == .checkLog {
                checks += 1
                machine.logRead(now: now)
            }
            machine.notificationsHandled(compact: false, now: now)
        }
        #expect(checks == 3, "at 2, 3 and 4 s")
        // The quiet read counts as a read.
        #expect(machine.next(now: t0 + .milliseconds(5_000)) == .readLog)
        machine.logRead(now: t0 + .milliseconds(5_000))
        #expect(machine.next(now: t0 + .milliseconds(5_500)) == .wait(timeout: .milliseconds(500)))
    }

    /// On a host whose relay another process hosts, that process checks the log for the
    /// host and passes on what it finds, and a position after each check: a follower does
    /// not check while positions come (it does after three intervals without one), and
    /// reads the log after quiet notifications only as a fallback
    /// (`followerQuietReadDelay`), since the host's reads move it on. The hosting process
    /// checks as a listener of its own.
    @Test func aFollowerOfTheRelayLeavesTheChecksToTheHostingProcess() {
        var checking = timing
        checking.unannouncedCheckInterval = .seconds(1)
        var follower = Machine(timing: checking, prunes: false, relay: .on, now: t0)
        _ = follower.next(now: t0)
        follower.connected(.relayed(hosting: false), now: t0)
        _ = follower.next(now: t0)
        follower.positioned(now: t0)
        // The host passes a position on after each of its checks: no check of its own.
        for second in 1...10 { follower.hostPassedOn(compact: true, now: t0 + .seconds(second)) }
        #expect(follower.next(now: t0 + .seconds(10)) == .wait(timeout: .seconds(3)), "no check while positions come")
        follower.notificationsHandled(compact: false, now: t0 + .seconds(10))
        #expect(follower.next(now: t0 + .seconds(11)) == .wait(timeout: .seconds(2)))
        #expect(follower.next(now: t0 + .seconds(13)) == .readLog, "the fallback quiet read")
        follower.logRead(now: t0 + .seconds(13))
        // A position the host passed on empties its delivered set: no read is due.
        follower.notificationsHandled(compact: false, now: t0 + .seconds(14))
        follower.hostPassedOn(compact: true, now: t0 + .milliseconds(14_002))
        #expect(follower.next(now: t0 + .milliseconds(15_002)) == .wait(timeout: .seconds(2)))
        // Three check intervals without a position: the host stopped checking (its
        // listener lost its session, say); the follower checks until positions come again.
        #expect(follower.next(now: t0 + .milliseconds(17_002)) == .checkLog, "the host went silent")
        follower.logRead(now: t0 + .milliseconds(17_100))
        #expect(follower.next(now: t0 + .milliseconds(17_600)) == .wait(timeout: .milliseconds(500)))
        #expect(follower.next(now: t0 + .milliseconds(18_100)) == .checkLog)
        follower.logRead(now: t0 + .milliseconds(18_100))
        follower.hostPassedOn(compact: true, now: t0 + .milliseconds(18_200))
        #expect(follower.next(now: t0 + .milliseconds(19_200)) == .wait(timeout: .seconds(2)), "positions again")
        // A position it cannot adopt (the host's read started past its own): a read of
        // its own, at once when notifications have been quiet (the position does not put
        // it off as a notification would).
        var refusing = follower
        refusing.hostPassedOn(compact: false, now: t0 + .milliseconds(19_300))
        #expect(refusing.next(now: t0 + .milliseconds(19_300)) == .readLog)
        // A new session following the relay starts trusting the host again.
        var silent = follower
        silent.failed(.relayWentAway, now: t0 + .seconds(30))
        _ = silent.next(now: t0 + .seconds(30))
        silent.connected(.relayed(hosting: false), now: t0 + .seconds(30))
        _ = silent.next(now: t0 + .seconds(30))
        silent.positioned(now: t0 + .seconds(30))
        #expect(silent.next(now: t0 + .seconds(31)) == .wait(timeout: .seconds(2)))

        var host = Machine(timing: checking, prunes: false, relay: .on, now: t0)
        _ = host.next(now: t0)
        host.connected(.relayed(hosting: true), now: t0)
        _ = host.next(now: t0)
        host.positioned(now: t0)
        #expect(host.next(now: t0 + .milliseconds(300)) == .wait(timeout: .milliseconds(700)))
        #expect(host.next(now: t0 + .seconds(1)) == .checkLog)
        host.logRead(now: t0 + .seconds(1))
        host.notificationsHandled(compact: false, now: t0 + .milliseconds(1_500))
        #expect(host.next(now: t0 + .milliseconds(2_000)) == .checkLog)
        host.logRead(now: t0 + .seconds(2))
        host.notificationsHandled(compact: false, now: t0 + .milliseconds(2_100))
        #expect(host.next(now: t0 + .milliseconds(2_200)) == .wait(timeout: .milliseconds(800)))
    }

    @Test func stoppingEndsEveryPhase() {
        var connecting = Machine(timing: timing, prunes: false, relay: .off, now: t0)
        _ = connecting.next(now: t0)
        connecting.stopRequested()
        #expect(connecting.next(now: t0) == .stop)

        var backingOff = serving()
        backingOff.failed(.sessionLost, now: t0)
        backingOff.stopRequested()
        #expect(backingOff.next(now: t0) == .stop)

        var listening = serving()
        listening.stopRequested()
        #expect(listening.next(now: t0) == .stop)
        listening.failed(.sessionLost, now: t0)
        listening.connected(.relayed(hosting: false), now: t0)
        listening.positioned(now: t0)
        #expect(listening.next(now: t0 + .seconds(1)) == .stop, "nothing after a stop starts it again")
    }
}
