internal import CLibPQ
import Foundation

/// A notification delivered by `NOTIFY` or `pg_notify`.
public struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    public var channel: String
    /// The payload (at most 8000 bytes; empty if none was given).
    public var payload: String
    /// The server process id of the sender's session.
    public var senderPID: Int32

    /// Creates a notification value.
    public init(channel: String, payload: String, senderPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.senderPID = senderPID
    }
}

extension Connection {
    /// Starts listening on a channel. The name is quoted, so any string is safe.
    ///
    /// A `LISTEN` belongs to the session: after `reconnect()` listen again.
    ///
    /// - Throws: `PostgresError`.
    public func listen(_ channel: String) throws {
        try execute("LISTEN " + Connection.quoteIdentifier(channel))
    }

    /// Stops listening on a channel.
    ///
    /// - Throws: `PostgresError`.
    public func unlisten(_ channel: String) throws {
        try execute("UNLISTEN " + Connection.quoteIdentifier(channel))
    }

    /// Sends a notification (delivered at commit when inside a transaction).
    ///
    /// - Throws: `PostgresError` (for example when the payload exceeds 8000 bytes).
    public func notify(_ channel: String, payload: String = "") throws {
        try execute("SELECT pg_notify($1, $2)", [channel, payload])
    }

    /// Returns the notifications that have arrived already, without waiting.
    ///
    /// - Throws: `PostgresError` with kind `.connectionLost` when the session broke.
    public func pendingNotifications() throws -> [PostgresNotification] {
        lock.lock()
        defer { lock.unlock() }
        let handle = try requireHandle()
        let socket = PQsocket(handle)
        if socket >= 0, pgdatakit_wait_readable(socket, 0) == 1 {
            try consumeInput(handle)
        }
        return drainNotifications(handle)
    }

    /// Waits until a notification arrives or `timeout` passes; returns `nil` on timeout.
    ///
    /// For example:
    ///
    /// ```swift
    /// try listener.listen("changes")
    /// if let notification = try listener.waitForNotification(timeout: .seconds(1)) {
    ///     print(notification.payload)
    /// }
    /// ```
    ///
    /// Holds the connection for the wait, so keep a dedicated connection for listening.
    ///
    /// - Throws: `PostgresError` with kind `.connectionLost` when the session broke.
    public func waitForNotification(timeout: Duration) throws -> PostgresNotification? {
        try waitForNotification(timeout: timeout, wakeDescriptor: -1)
    }

    /// `waitForNotification(timeout:)` that also returns `nil` as soon as
    /// `wakeDescriptor` becomes readable (the listener's stop pipe); `-1` for none.
    package func waitForNotification(timeout: Duration, wakeDescriptor: Int32) throws -> PostgresNotification? {
        lock.lock()
        defer { lock.unlock() }
        let handle = try requireHandle()
        if let first = drainNotifications(handle, limit: 1).first { return first }
        let deadline = ContinuousClock.now + timeout
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            let milliseconds = max(0, Int32(clamping: remaining.milliseconds))
            let socket = PQsocket(handle)
            guard socket >= 0 else { throw lostError(handle) }
            let ready = pgdatakit_wait_readable_or_woken(socket, wakeDescriptor, milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                throw PostgresError(
                    kind: .client, message: "poll failed: \(String(cString: strerror(errno)))")
            }
            if ready == 2 { return nil }
            if ready == 1 {
                try consumeInput(handle)
                if let notification = drainNotifications(handle, limit: 1).first {
                    return notification
                }
            }
            if remaining <= .zero { return nil }
        }
    }

    /// The session's socket, for waiting on it beside other descriptors; -1 when closed.
    package var socketDescriptor: Int32 {
        lock.lock()
        defer { lock.unlock() }
        return handle.map { PQsocket($0) } ?? -1
    }

    /// Reads the socket once, without waiting, and returns every notification that has
    /// arrived: `pendingNotifications()` for a caller whose own `poll` found the socket
    /// readable (which need not ask the kernel again).
    ///
    /// - Throws: `PostgresError` with kind `.connectionLost` when the session broke.
    package func readNotifications() throws -> [PostgresNotification] {
        lock.lock()
        defer { lock.unlock() }
        let handle = try requireHandle()
        try consumeInput(handle)
        return drainNotifications(handle)
    }

    /// Every notification that has arrived, without reading the socket again.
    package func drainNotifications() throws -> [PostgresNotification] {
        lock.lock()
        defer { lock.unlock() }
        return drainNotifications(try requireHandle())
    }

    private func consumeInput(_ handle: OpaquePointer) throws {
        if PQconsumeInput(handle) == 0 || PQstatus(handle) == CONNECTION_BAD {
            throw lostError(handle)
        }
        _ = PQisBusy(handle)  // parses what arrived; a FATAL error sets serverEndedSession
        if serverEndedSession {
            throw PostgresError(
                kind: .connectionLost, message: "the server ended the session (FATAL error received)")
        }
    }

    private func lostError(_ handle: OpaquePointer) -> PostgresError {
        PostgresError(
            kind: .connectionLost,
            message: String(cString: PQerrorMessage(handle))
                .trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private func drainNotifications(_ handle: OpaquePointer, limit: Int = .max) -> [PostgresNotification] {
        var notifications: [PostgresNotification] = []
        while notifications.count < limit, let notify = PQnotifies(handle) {
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    senderPID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        return notifications
    }
}

extension Duration {
    /// The duration in whole milliseconds, rounded up so short waits do not become 0.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }
}
