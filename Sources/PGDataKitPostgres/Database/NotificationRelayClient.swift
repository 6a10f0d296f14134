import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A process's connection to its host's notification relay (`NotificationRelay`): the
/// notifications of the relay's channel, in the order its session received them, from
/// the moment the relay's key arrived; and the way to the hosting process's notifier
/// (`send(toNotify:)`).
// Unchecked: read by one thread at a time (the listener's; `ChangeListener.start()` hands
// it over once, before that thread starts); `send(toNotify:)` and
// `sendWithoutWaiting(toNotify:)`, from any thread, write the socket only, one message at
// a time under their own lock.
package final class NotificationRelayClient: @unchecked Sendable {
    /// How long a relay may stay silent (it sends a heartbeat every second) before the
    /// connection counts as lost.
    package static let silenceLimit: Duration = .seconds(10)

    /// The socket.
    package let descriptor: Int32
    /// The channel the relay listens on (its notifications carry it).
    private let channel: String
    /// Bytes of a message not complete yet.
    private var buffer: [UInt8] = []
    /// What each read goes through (`LocalSocket.receive(_:appendingTo:scratch:)`).
    private var scratch: [UInt8] = []
    private var lastHeard = ContinuousClock.now
    /// The relay closed the connection; the buffer may still hold what it sent before.
    private var peerClosed = false
    /// Serialises `send(toNotify:)`'s writes; `true` once one failed (the stream may hold
    /// part of a message: nothing more is written).
    private let writing = Mutex(false)

    /// The relay closed the connection and nothing it sent is left to hand out.
    private static var closedByRelay: LocalSocket.Failure {
        LocalSocket.Failure("the notification relay closed the connection", code: ECONNRESET)
    }

    /// Connects to the relay at `endpoint` and waits (up to `timeout`) for its key. `nil`
    /// when no relay listens there.
    ///
    /// - Throws: `LocalSocket.Failure` when the relay does not answer in time, answers
    ///   for another key, or the socket fails.
    package static func connect(
        to endpoint: NotificationRelayEndpoint, channel: String, timeout: Duration
    ) throws -> NotificationRelayClient? {
        guard let descriptor = try LocalSocket.connect(to: endpoint.socketPath) else { return nil }
        let client = NotificationRelayClient(descriptor: descriptor, channel: channel)
        let deadline = ContinuousClock.now + timeout
        while true {
            if let key = try client.readKey() {
                guard key == endpoint.key else {
                    throw LocalSocket.Failure("the relay at", path: endpoint.socketPath + " serves another database", code: EPROTO)
                }
                return client
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else {
                throw LocalSocket.Failure("no answer from the relay at", path: endpoint.socketPath, code: ETIMEDOUT)
            }
            _ = try LocalSocket.poll([(descriptor, Int16(POLLIN))], timeout: remaining)
        }
    }

    private init(descriptor: Int32, channel: String) {
        self.descriptor = descriptor
        self.channel = channel
    }

    deinit { close(descriptor) }

    /// Hands payloads of this process's committed saves to the hosting process, whose
    /// notifier sends them (`NotificationRelay`'s `T` message), waiting up to `timeout`
    /// for the socket to take them.
    ///
    /// - Throws: `LocalSocket.Failure` when the socket fails or does not take the message
    ///   in time; the connection then takes no more (the caller notifies on its own
    ///   session, and the relay drops a process whose message it cannot read).
    package func send(toNotify payloads: [String], timeout: Duration = .seconds(1)) throws {
        var message: [UInt8] = []
        NotificationRelay.Message.encode(toNotify: payloads, into: &message)
        try send(message, timeout: timeout)
    }

    /// Writes a whole message, waiting up to `timeout` for the socket to take it.
    private func send(_ message: [UInt8], timeout: Duration) throws {
        try writing.withLock { failed in
            guard !failed else { throw LocalSocket.Failure("an earlier message to the notification relay failed", code: EPIPE) }
            try finish(message, from: 0, deadline: ContinuousClock.now + timeout, failed: &failed)
        }
    }

    /// Asks the relay to pass notifications on to this process once per `pace` rather
    /// than as they come (`.zero`: as they come; at most `NotificationRelay.maximumPace`):
    /// for a process with no use for each notification at once, which then wakes a few
    /// times a second. Nothing is dropped or reordered; positions and heartbeats wait too.
    ///
    /// - Throws: as `send(toNotify:timeout:)`.
    package func setPace(_ pace: Duration, timeout: Duration = .seconds(1)) throws {
        var message: [UInt8] = []
        NotificationRelay.Message.encode(pace: pace, into: &message)
        try send(message, timeout: timeout)
    }

    /// `send(toNotify:timeout:)` for a thread that must not wait on the relay (a save's,
    /// right after its commit): `false`, with nothing sent, when the socket takes no byte
    /// at once (the hosting process is behind) or another thread is writing; `true` once
    /// the whole message went. It waits (up to `timeout`) only to finish a message the
    /// socket took part of.
    ///
    /// - Throws: as `send(toNotify:timeout:)`.
    package func sendWithoutWaiting(toNotify payloads: [String], timeout: Duration = .seconds(1)) throws -> Bool {
        var message: [UInt8] = []
        NotificationRelay.Message.encode(toNotify: payloads, into: &message)
        let sent = try writing.withLockIfAvailable { failed -> Bool in
            guard !failed else { throw LocalSocket.Failure("an earlier message to the notification relay failed", code: EPIPE) }
            let taken: Int
            do {
                taken = try LocalSocket.send(descriptor, message, from: 0)
            } catch {
                failed = true
                throw error
            }
            guard taken > 0 else { return false }
            try finish(message, from: taken, deadline: ContinuousClock.now + timeout, failed: &failed)
            return true
        }
        return sent ?? false
    }

    /// Writes the rest of `message` from `sent`, waiting for the socket up to `deadline`;
    /// marks the connection `failed` when it cannot (part of the message may be written).
    /// Call under `writing`.
    private func finish(_ message: [UInt8], from sent: Int, deadline: ContinuousClock.Instant, failed: inout Bool) throws {
        var sent = sent
        do {
            while true {
                sent = try LocalSocket.send(descriptor, message, from: sent)
                if sent == message.count { return }
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero else {
                    throw LocalSocket.Failure("the notification relay did not take a message in time", code: ETIMEDOUT)
                }
                _ = try LocalSocket.poll([(descriptor, Int16(POLLOUT))], timeout: remaining)
            }
        } catch {
            failed = true
            throw error
        }
    }

    /// How long since the relay last sent anything.
    package var silence: Duration { lastHeard.duration(to: .now) }

    /// The notifications that have arrived (empty when none has).
    ///
    /// - Throws: `LocalSocket.Failure` when the relay closed the connection (it lost its
    ///   session, or this process fell too far behind) or sent something unreadable.
    package func receive() throws -> [PostgresNotification] {
        try receiveMessages().notifications
    }

    /// The notifications that have arrived, and the last position the hosting process
    /// passed on among them (`NotificationRelay.passOn(_:position:)`). A listener hands
    /// on every notification returned before it adopts the position (those that came
    /// after the position only stay in its delivered set).
    ///
    /// - Throws: as `receive()`.
    package func receiveMessages() throws -> (notifications: [PostgresNotification], position: String?) {
        try read()
        var notifications: [PostgresNotification] = []
        var position: String?
        var offset = 0
        while let (type, body) = try message(at: &offset) {
            switch type {
            case NotificationRelay.Message.notification:
                guard body.count >= 4 else { throw Self.unreadable }
                let pid = body.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                notifications.append(
                    PostgresNotification(
                        channel: channel, payload: String(decoding: body.dropFirst(4), as: UTF8.self),
                        senderPID: Int32(bitPattern: pid)))
            case NotificationRelay.Message.position:
                position = String(decoding: body, as: UTF8.self)
            case NotificationRelay.Message.heartbeat:
                break
            default:
                throw Self.unreadable
            }
        }
        buffer.removeSubrange(0..<offset)
        if notifications.isEmpty && position == nil && peerClosed { throw Self.closedByRelay }
        return (notifications, position)
    }

    /// The key, once its message has arrived (nothing else may come first).
    private func readKey() throws -> String? {
        try read()
        var offset = 0
        guard let (type, body) = try message(at: &offset) else {
            if peerClosed { throw Self.closedByRelay }
            return nil
        }
        guard type == NotificationRelay.Message.key else { throw Self.unreadable }
        let key = String(decoding: body, as: UTF8.self)
        buffer.removeSubrange(0..<offset)
        return key
    }

    /// Appends what has arrived to the buffer; notes when the relay closed the connection
    /// (what it sent before is still handed out).
    private func read() throws {
        while !peerClosed {
            guard let count = try LocalSocket.receive(descriptor, appendingTo: &buffer, scratch: &scratch) else {
                peerClosed = true
                return
            }
            if count == 0 { return }
            lastHeard = .now
            if count < scratch.count { return }
        }
    }

    /// The complete message at `offset`, moving it past; `nil` when it has not all arrived.
    private func message(at offset: inout Int) throws -> (UInt8, ArraySlice<UInt8>)? {
        switch NotificationRelay.Message.frame(in: buffer, at: &offset) {
        case .incomplete: return nil
        case .unreadable: throw Self.unreadable
        case .message(let type, let body): return (type, body)
        }
    }

    private static var unreadable: LocalSocket.Failure {
        LocalSocket.Failure("the notification relay sent an unreadable message", code: EPROTO)
    }
}
