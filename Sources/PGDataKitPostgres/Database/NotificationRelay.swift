import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One `LISTEN` session shared by the processes of a host: it receives the notifications
/// of one channel and passes each on, unchanged and in order, to every process connected
/// to its Unix socket.
///
/// PostgreSQL wakes every listening session on every notifying commit, so N listening
/// processes cost the server N wakeups, queue reads and sends per commit, and each
/// notifying commit waits on them (the listening floor of the throughput bench). Through
/// a relay the server has one listener per host, whatever the number of processes.
///
/// The relay is hosted by the process that holds the endpoint's lock, on a thread of its
/// own. Its protocol is a stream of messages `type (1 byte) · length (4 bytes, big
/// endian) · body`: `K` with the endpoint's key, sent once a follower is registered (every
/// notification read after that reaches it); `N` with the sender's process id (4 bytes)
/// and the payload; `S` with a position the hosting process passes on (`passOn(_:position:)`);
/// `P`, a heartbeat, after a second with nothing sent. A follower sends `T`, payloads to
/// notify (each a 4-byte length and its bytes), which the relay hands to the hosting
/// process (`forward`), whose notifier sends them with its own saves' in one notifying
/// transaction: the host's saves share notifying commits whichever process made them.
/// A follower may also send `W`, a pace (4 bytes, milliseconds; 0 for none, at most
/// `maximumPace`): the relay then holds what it passes on to that follower and sends it
/// once per pace (or as soon as 64 KiB are held), so a process that has no use for each
/// notification at once — none of its observers wants records — wakes a few times a
/// second instead of once per burst window. When its session
/// drops, the relay closes every follower's socket (each then catches up from the change
/// log, as after losing a session of its own) and reconnects before accepting again.
/// A follower whose unread messages pass `maximumBacklog` (16 MiB by default) is dropped
/// the same way.
package final class NotificationRelay: Sendable {
    /// How long the relay stays silent before it sends a heartbeat.
    static let heartbeatInterval: Duration = .seconds(1)
    /// The shortest time between two sends to the followers during a burst: while
    /// notifications come faster than one per send (the last send carried several), what
    /// arrives within the window goes together, so each process wakes once for several
    /// saves instead of once per save. Otherwise — a quiet spell, or one save at a time —
    /// a notification goes at once.
    static let coalescingWindow: Duration = .milliseconds(2)
    /// Unsent bytes a follower may have before it is dropped (by default).
    static let defaultMaximumBacklog = 16 << 20
    /// The longest pace a follower may ask for (`W`): longer ones are cut to it, well
    /// inside the followers' `NotificationRelayClient.silenceLimit`.
    package static let maximumPace: Duration = .seconds(1)
    /// Bytes held for a paced follower that are sent at once, whatever its pace.
    static let pacedHoldLimit = 64 << 10

    /// Message types.
    enum Message {
        static let key = UInt8(ascii: "K")
        static let notification = UInt8(ascii: "N")
        static let heartbeat = UInt8(ascii: "P")
        static let position = UInt8(ascii: "S")
        static let toNotify = UInt8(ascii: "T")
        static let pace = UInt8(ascii: "W")

        /// A `W` message's bytes: the pace in whole milliseconds (cut to `maximumPace`).
        static func encode(pace: Duration, into bytes: inout [UInt8]) {
            let milliseconds = min(max(pace, .zero), maximumPace) / .milliseconds(1)
            var body: [UInt8] = []
            appendInteger(UInt32(milliseconds.rounded(.down)), to: &body)
            encode(Self.pace, body, into: &bytes)
        }

        /// The pace of a `W` message's body; `nil` when it is not one.
        static func pace(in body: ArraySlice<UInt8>) -> Duration? {
            guard body.count == 4 else { return nil }
            let milliseconds = body.reduce(0) { $0 << 8 | Int($1) }
            return min(.milliseconds(milliseconds), maximumPace)
        }

        /// A `T` message's bytes: the payloads, each its length and its bytes.
        static func encode(toNotify payloads: [String], into bytes: inout [UInt8]) {
            var body: [UInt8] = []
            for payload in payloads {
                appendInteger(UInt32(truncatingIfNeeded: payload.utf8.count), to: &body)
                body.append(contentsOf: payload.utf8)
            }
            encode(toNotify, body, into: &bytes)
        }

        /// What the bytes of a stream hold at an offset.
        enum Frame {
            /// Not all of the next message has arrived.
            case incomplete
            /// A length past 16 MiB: no message of the protocol.
            case unreadable
            /// A whole message.
            case message(type: UInt8, body: ArraySlice<UInt8>)
        }

        /// The message at `offset` of `buffer`, moving `offset` past it when it is whole
        /// (both ends of the socket read messages this way).
        static func frame(in buffer: [UInt8], at offset: inout Int) -> Frame {
            guard buffer.count - offset >= 5 else { return .incomplete }
            let length = buffer[(offset + 1)..<(offset + 5)].reduce(0) { $0 << 8 | Int($1) }
            guard length <= 1 << 24 else { return .unreadable }
            guard buffer.count - offset - 5 >= length else { return .incomplete }
            let type = buffer[offset]
            let body = buffer[(offset + 5)..<(offset + 5 + length)]
            offset += 5 + length
            return .message(type: type, body: body)
        }

        /// The payloads of a `T` message's body; `nil` when it is not one.
        static func payloads(in body: ArraySlice<UInt8>) -> [String]? {
            var payloads: [String] = []
            var offset = body.startIndex
            while offset < body.endIndex {
                guard body.endIndex - offset >= 4 else { return nil }
                let length = body[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
                offset += 4
                guard body.endIndex - offset >= length else { return nil }
                payloads.append(String(decoding: body[offset..<(offset + length)], as: UTF8.self))
                offset += length
            }
            return payloads
        }

        /// A message's bytes.
        static func encode(_ type: UInt8, _ body: some Collection<UInt8>, into bytes: inout [UInt8]) {
            bytes.append(type)
            appendInteger(UInt32(truncatingIfNeeded: body.count), to: &bytes)
            bytes.append(contentsOf: body)
        }

        /// A notification's message bytes.
        static func encode(_ notification: PostgresNotification, into bytes: inout [UInt8]) {
            let payload = notification.payload.utf8
            bytes.append(Self.notification)
            appendInteger(UInt32(truncatingIfNeeded: payload.count + 4), to: &bytes)
            appendInteger(UInt32(bitPattern: notification.senderPID), to: &bytes)
            bytes.append(contentsOf: payload)
        }

        static func appendInteger(_ value: UInt32, to bytes: inout [UInt8]) {
            bytes.append(UInt8(truncatingIfNeeded: value >> 24))
            bytes.append(UInt8(truncatingIfNeeded: value >> 16))
            bytes.append(UInt8(truncatingIfNeeded: value >> 8))
            bytes.append(UInt8(truncatingIfNeeded: value))
        }
    }

    /// A connected process and what it has not been sent yet.
    private struct Follower {
        var descriptor: Int32
        var pending: [UInt8] = []
        var sent = 0
        /// What it sent that is not a whole message yet.
        var inbound: [UInt8] = []
        /// The pace it asked for (`W`); `.zero`: everything goes at once.
        var pace: Duration = .zero
        /// What is held for it until its pace is due.
        var held: [UInt8] = []
        /// When what was held for it last went.
        var heldSince = ContinuousClock.now

        /// When what is held for it is due (`nil` when nothing is held).
        var heldDue: ContinuousClock.Instant? { held.isEmpty ? nil : heldSince + pace }
    }

    private struct State {
        var backendPID: Int32?
        var followers = 0
        /// Followers with a pace (`W`).
        var pacedFollowers = 0
        /// Messages of the hosting process to pass on (`passOn(_:position:)`), and how
        /// many.
        var injected: [UInt8] = []
        var injectedCount = 0
    }

    let endpoint: NotificationRelayEndpoint
    private let lockDescriptor: Int32
    private let configuration: ConnectionConfiguration
    private let channel: String
    private let logger: Logger
    /// Takes the payloads followers ask to be notified (`T`), on the relay's thread.
    private let forward: @Sendable ([String]) -> Void
    private let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    private let ended = Atomic<Bool>(false)
    private let released = Atomic<Bool>(false)
    /// Unsent bytes a follower may have before it is dropped.
    let maximumBacklog: Int

    /// A relay for `endpoint` (whose lock `lockDescriptor` holds; the relay closes it when
    /// it stops), listening on `channel` with sessions of `configuration`; `forward`
    /// takes, on the relay's thread, the payloads followers send to be notified (it must
    /// not block: the hosting process queues them for its notifier).
    package init(
        endpoint: NotificationRelayEndpoint, lockDescriptor: Int32, configuration: ConnectionConfiguration,
        channel: String, logger: Logger, maximumBacklog: Int = defaultMaximumBacklog,
        forward: @escaping @Sendable ([String]) -> Void
    ) throws {
        self.forward = forward
        self.maximumBacklog = maximumBacklog
        (wakeRead, wakeWrite) = try LocalSocket.pipe()
        self.endpoint = endpoint
        self.lockDescriptor = lockDescriptor
        self.configuration = configuration
        self.channel = channel
        self.logger = logger
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// The process id of the relay's server session while connected.
    var backendPID: Int32? { state.withLock { $0.backendPID } }

    /// How many processes are connected (the hosting process's listener among them).
    package var followerCount: Int { state.withLock { $0.followers } }

    /// How many of the followers asked for a pace (`W`), as of the relay's last turn.
    package var pacedFollowerCount: Int { state.withLock { $0.pacedFollowers } }

    /// Whether the relay's thread has ended (stopped, or given up on an error of `poll`):
    /// its socket is gone and its lock released.
    package var hasEnded: Bool { ended.load(ordering: .acquiring) }

    /// Connects and `LISTEN`s, opens the socket, then serves on a thread of its own.
    ///
    /// - Throws: `PostgresError` when the session cannot be opened, or
    ///   `LocalSocket.Failure`; a session through a connection pooler is refused (a
    ///   pooler may not keep the `LISTEN`, and each process checks that on its own
    ///   session). After a failure, call `stop()` to release the lock.
    package func start() throws {
        let connection = try connect()
        if connection.isBehindPooler {
            connection.close()
            throw LocalSocket.Failure("a session through a connection pooler cannot host the relay", code: EPROTO)
        }
        let listening: Int32
        do {
            listening = try LocalSocket.listen(at: endpoint.socketPath)
        } catch {
            connection.close()
            throw error
        }
        started.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            serve(connection, listening: listening)
            close(listening)
            release()
            ended.store(true, ordering: .releasing)
            finished.signal()
        }
        thread.name = "pgdatakit.relay"
        thread.start()
        logger.debug("hosting the notification relay", metadata: ["socket": "\(endpoint.socketPath)"])
    }

    /// Passes `payloads` (as notifications sent by this process) and then `position` on
    /// to every follower, after every notification passed on so far; dropped when the
    /// relay has no session (its followers were dropped and catch up).
    ///
    /// The hosting process's change listener passes on what its reads of the change log
    /// found that no notification had announced, then the read's position, so that the
    /// host's other processes need not read the log themselves.
    package func passOn(_ payloads: [String], position: String?) {
        guard !payloads.isEmpty || position != nil else { return }
        let pid = getpid()
        let wakes = state.withLock { state -> Bool in
            let wasEmpty = state.injected.isEmpty
            for payload in payloads {
                Message.encode(PostgresNotification(channel: channel, payload: payload, senderPID: pid), into: &state.injected)
            }
            if let position { Message.encode(Message.position, Array(position.utf8), into: &state.injected) }
            state.injectedCount += payloads.count + (position == nil ? 0 : 1)
            return wasEmpty
        }
        guard wakes else { return }
        var byte: UInt8 = 0
        _ = write(wakeWrite, &byte, 1)
    }

    /// Stops serving (every follower's socket closes), removes the socket and releases the
    /// lock, so another process can host.
    package func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if started.load(ordering: .acquiring) {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
            finished.wait()
        }
        release()
    }

    /// Removes the socket, then releases the lock (in that order: the next host makes its
    /// socket only once it holds the lock). Once.
    private func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        unlink(endpoint.socketPath)
        close(lockDescriptor)
    }

    private func connect() throws -> Connection {
        let connection = try Connection(configuration, logger: logger)
        do {
            try connection.listen(channel)
        } catch {
            connection.close()
            throw error
        }
        let pid = connection.backendPID
        state.withLock { $0.backendPID = pid }
        return connection
    }

    // MARK: - The relay's thread

    private func serve(_ initial: Connection, listening: Int32) {
        var connection: Connection? = initial
        var followers: [Follower] = []
        // What the followers' messages are read through (`LocalSocket.receive`).
        var scratch: [UInt8] = []
        // Notifications read and not passed on yet (see `coalescingWindow`), how many,
        // and how many the last send carried.
        var outgoing: [UInt8] = []
        var outgoingCount = 0
        var lastCount = 0
        var lastSent = ContinuousClock.now - Self.coalescingWindow
        var delay: Duration = .milliseconds(50)
        defer {
            connection?.close()
            dropFollowers(&followers)
        }
        while !stopping.load(ordering: .relaxed) {
            guard let session = connection else {
                // Followers were dropped with the session; reconnect before accepting
                // again (a follower registered now must miss nothing after its key).
                if waitForWake(delay) { break }
                connection = reconnect(delay: &delay)
                continue
            }
            let entries = pollEntries(session, listening: listening, followers: followers)
            let sinceSent = lastSent.duration(to: .now)
            let window = lastCount > 1 ? Self.coalescingWindow : .zero
            var timeout = outgoing.isEmpty ? Self.heartbeatInterval - sinceSent : window - sinceSent
            // (Or when what is held for a paced follower falls due.)
            if let due = followers.lazy.compactMap(\.heldDue).min() { timeout = min(timeout, ContinuousClock.now.duration(to: due)) }
            let events: [Int16]
            do {
                events = try LocalSocket.poll(entries, timeout: max(.zero, timeout))
            } catch {
                logger.error("the notification relay stops: \(error)")
                break
            }
            if events[0] != 0 {
                // Stopped, or the hosting process has messages to pass on.
                if wokenToStop() { break }
                let (bytes, count) = takeInjected()
                outgoing += bytes
                outgoingCount += count
            }
            if events[1] != 0 {
                do {
                    for notification in try session.readNotifications() {  // (the poll found it readable)
                        Message.encode(notification, into: &outgoing)
                        outgoingCount += 1
                    }
                } catch {
                    logger.warning("the notification relay lost its session; its processes catch up: \(error)")
                    session.close()
                    connection = nil
                    dropFollowers(&followers)
                    outgoing = []
                    outgoingCount = 0
                    _ = takeInjected()
                    continue
                }
            }
            // Pass on at most once per window during a burst, at once otherwise; a
            // heartbeat after a quiet second.
            var batch: [UInt8] = []
            let now = ContinuousClock.now
            if !outgoing.isEmpty, lastSent.duration(to: now) >= window {
                swap(&batch, &outgoing)
                lastCount = outgoingCount
                outgoingCount = 0
            } else if outgoing.isEmpty, lastSent.duration(to: now) >= Self.heartbeatInterval {
                Message.encode(Message.heartbeat, [], into: &batch)
            }
            pass(batch, to: &followers, events: events, scratch: &scratch)
            if !batch.isEmpty { lastSent = now }
            if events[2] != 0 { accept(listening, into: &followers) }
            report(followers)
        }
    }

    /// Publishes how many followers there are, and how many asked for a pace.
    private func report(_ followers: [Follower]) {
        let (count, paced) = (followers.count, followers.count { $0.pace > .zero })
        state.withLock {
            $0.followers = count
            $0.pacedFollowers = paced
        }
    }

    /// Opens the session again, or returns `nil` and doubles `delay` (up to 5 seconds).
    private func reconnect(delay: inout Duration) -> Connection? {
        do {
            let connection = try connect()
            delay = .milliseconds(50)
            logger.debug("the notification relay reconnected")
            return connection
        } catch {
            delay = min(delay * 2, .seconds(5))
            logger.warning("the notification relay could not reconnect, retrying in \(delay): \(error)")
            return nil
        }
    }

    /// What to poll: the wake pipe, the session, the listening socket, then each
    /// follower (for writing too when it has bytes waiting).
    private func pollEntries(
        _ session: Connection, listening: Int32, followers: [Follower]
    ) -> [(descriptor: Int32, events: Int16)] {
        var entries: [(descriptor: Int32, events: Int16)] = [
            (wakeRead, Int16(POLLIN)), (session.socketDescriptor, Int16(POLLIN)), (listening, Int16(POLLIN)),
        ]
        for follower in followers {
            let wantsOut = follower.sent < follower.pending.count
            entries.append((follower.descriptor, Int16(POLLIN) | (wantsOut ? Int16(POLLOUT) : 0)))
        }
        return entries
    }

    /// Queues `batch` for every follower (held for a paced one until its pace is due)
    /// and writes what it can take; a follower that hung up or cannot be written to is
    /// closed and dropped. `events` are the poll's, the followers' from index 3; what
    /// they sent is read through `scratch`.
    private func pass(_ batch: [UInt8], to followers: inout [Follower], events: [Int16], scratch: inout [UInt8]) {
        var index = followers.count
        let now = ContinuousClock.now
        while index > 0 {
            index -= 1
            let revents = events[3 + index]
            if revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0, !receive(from: &followers[index], scratch: &scratch) {
                close(followers[index].descriptor)
                followers.remove(at: index)
                continue
            }
            if followers[index].pace > .zero || !followers[index].held.isEmpty {
                if followers[index].held.isEmpty { followers[index].heldSince = now }
                followers[index].held += batch
                if let due = followers[index].heldDue, now >= due || followers[index].held.count >= Self.pacedHoldLimit {
                    followers[index].pending += followers[index].held
                    followers[index].held.removeAll(keepingCapacity: true)
                }
            } else {
                followers[index].pending += batch
            }
            if !flush(&followers[index]) {
                close(followers[index].descriptor)
                followers.remove(at: index)
            }
        }
    }

    /// Closes every follower (they catch up from the change log) and clears what the
    /// relay reports about its session.
    private func dropFollowers(_ followers: inout [Follower]) {
        for follower in followers { close(follower.descriptor) }
        followers = []
        state.withLock {
            $0.backendPID = nil
            $0.followers = 0
        }
    }

    /// Registers every waiting process and sends it the key.
    private func accept(_ listening: Int32, into followers: inout [Follower]) {
        while true {
            let descriptor: Int32?
            do {
                descriptor = try LocalSocket.accept(listening)
            } catch {
                logger.warning("the notification relay could not accept a process: \(error)")
                return
            }
            guard let descriptor else { return }
            var follower = Follower(descriptor: descriptor)
            Message.encode(Message.key, Array(endpoint.key.utf8), into: &follower.pending)
            if flush(&follower) {
                followers.append(follower)
            } else {
                close(descriptor)
            }
        }
    }

    /// Sends what a follower can take now; `false` when it is gone or too far behind.
    private func flush(_ follower: inout Follower) -> Bool {
        guard follower.sent < follower.pending.count else { return true }
        do {
            follower.sent = try LocalSocket.send(follower.descriptor, follower.pending, from: follower.sent)
        } catch {
            return false
        }
        if follower.sent == follower.pending.count {
            follower.pending.removeAll(keepingCapacity: true)
            follower.sent = 0
        } else if follower.pending.count - follower.sent > maximumBacklog {
            logger.warning("a process stopped reading the notification relay; it is dropped and will catch up")
            return false
        }
        return true
    }

    /// Reads what a follower sent and forwards the payloads of its whole `T` messages;
    /// `false` at its end or when it sent something else (it is then dropped).
    private func receive(from follower: inout Follower, scratch: inout [UInt8]) -> Bool {
        // (`nil`: the follower's end, or a broken socket.)
        let received = try? LocalSocket.receive(follower.descriptor, appendingTo: &follower.inbound, scratch: &scratch)
        guard received != nil else { return false }
        var offset = 0
        while true {
            switch Message.frame(in: follower.inbound, at: &offset) {
            case .incomplete:
                follower.inbound.removeSubrange(0..<offset)
                return true
            case .message(Message.toNotify, let body):
                if let payloads = Message.payloads(in: body) {
                    if !payloads.isEmpty { forward(payloads) }
                    continue
                }
                logger.warning("a process sent the notification relay an unreadable message; it is dropped and will catch up")
                return false
            case .message(Message.pace, let body):
                if let pace = Message.pace(in: body) {
                    // (What is held goes when the new pace is due: at once for none.)
                    follower.pace = pace
                    continue
                }
                fallthrough
            case .message, .unreadable:
                logger.warning("a process sent the notification relay an unreadable message; it is dropped and will catch up")
                return false
            }
        }
    }

    /// Waits for `duration` unless stopped first; whether it was stopped. (Messages the
    /// hosting process passes on meanwhile are dropped: there are no followers.)
    private func waitForWake(_ duration: Duration) -> Bool {
        let events = try? LocalSocket.poll([(wakeRead, Int16(POLLIN))], timeout: duration)
        if (events?.first ?? 0) != 0 {
            _ = wokenToStop()
            _ = takeInjected()
        }
        return stopping.load(ordering: .relaxed)
    }

    /// Takes the messages the hosting process passed on (`passOn(_:position:)`), and how
    /// many.
    private func takeInjected() -> (bytes: [UInt8], count: Int) {
        state.withLock { state in
            defer {
                state.injected = []
                state.injectedCount = 0
            }
            return (state.injected, state.injectedCount)
        }
    }

    /// Reads the wake pipe's bytes (it was readable); whether the relay is stopping.
    private func wokenToStop() -> Bool {
        var bytes = [UInt8](repeating: 0, count: 64)
        _ = read(wakeRead, &bytes, bytes.count)
        return stopping.load(ordering: .acquiring)
    }
}
