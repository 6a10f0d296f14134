import Foundation
import Synchronization

/// The records of the change log after a token, replayed and then live, as an async
/// sequence; from `StoreCoordinator.history(after:)` or `HistoryReader.records()`.
///
/// For example, stopping after a while and keeping the position:
///
/// ```swift
/// var records = coordinator.history(after: token).makeAsyncIterator()
/// while let record = try await records.next() {
///     print(record)
///     if done { break }
/// }
/// token = records.token ?? token   // where the next run goes on
/// ```
///
/// How it works: it reads the log after its position (`history(after:limit:)`, pages of
/// `pageSize`) until a read comes back short, then waits for the coordinator's change
/// listener to receive a notification — of any process, this one's included — or to
/// reconnect after a dropped session, and reads again. The wake-up is registered before
/// the first read, and cleared before each read: a save that commits after a read's
/// snapshot notifies after that, so it wakes the next read, and no save is waited for
/// twice or missed. Every record is delivered by a read after the position of the one
/// before, so each comes once, in commit order. As a last resort (a notification lost
/// without the listener noticing) it also reads every `pollInterval` while idle.
public struct HistorySequence: AsyncSequence, Sendable {
    /// Each element is one change record, carrying the token after it.
    public typealias Element = ChangeRecord

    /// Where the sequence starts.
    enum Start: Sendable {
        case token(HistoryToken)
        /// The acknowledged token of the reader of this name, read when iteration starts.
        case reader(String)
    }

    let coordinator: StoreCoordinator
    let start: Start
    /// Records per read.
    var pageSize = 2_000
    /// How long an idle sequence waits for a wake-up before reading anyway.
    var pollInterval: Duration = .seconds(5)

    init(coordinator: StoreCoordinator, start: Start) {
        self.coordinator = coordinator
        self.start = start
    }

    /// An iterator that starts reading at its first `next()`.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(sequence: self)
    }

    /// Reads the records one at a time; see `HistorySequence`.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private let sequence: HistorySequence
        private let feed = HistoryFeed()
        /// Where the next read starts (`nil` until the start is resolved).
        private var position: HistoryToken?
        private var buffer: [ChangeRecord] = []
        private var index = 0
        private var mustRead = true
        private var finished = false

        /// The position after the last record `next()` returned — or further on, when
        /// reads since found nothing new: where another sequence would go on from.
        /// `nil` before the first read (of a reader's sequence).
        public private(set) var token: HistoryToken?

        init(sequence: HistorySequence) {
            self.sequence = sequence
            if case .token(let start) = sequence.start {
                position = start
                token = start
            }
        }

        /// The next record, waiting for one to be committed when the log has no more;
        /// `nil` once the task is cancelled or the coordinator closed.
        ///
        /// - Throws: what `StoreCoordinator.history(after:limit:)` throws (after which the
        ///   iterator returns `nil`); a lost connection is retried instead.
        public mutating func next() async throws -> ChangeRecord? {
            if index < buffer.count {
                defer { index += 1 }
                token = buffer[index].historyToken
                return buffer[index]
            }
            buffer = []
            index = 0
            while !finished {
                if Task.isCancelled || feed.isClosed {
                    finished = true
                    break
                }
                if !mustRead { await feed.waitForWakeUp(upTo: sequence.pollInterval) }
                if Task.isCancelled || feed.isClosed {
                    finished = true
                    break
                }
                let page: HistoryPage
                do {
                    guard let read = try await readPage() else {
                        finished = true
                        break
                    }
                    page = read
                } catch {
                    finished = true
                    throw error
                }
                position = page.token
                mustRead = page.hasMore
                if let first = page.records.first {
                    buffer = page.records
                    index = 1
                    token = first.historyToken
                    return first
                }
                token = page.token
            }
            return nil
        }

        /// One read after `position` (resolving the start first), off the cooperative
        /// threads; retries lost connections with the listener's backoff. `nil` when the
        /// coordinator was closed or the task cancelled meanwhile.
        private mutating func readPage() async throws -> HistoryPage? {
            let options = sequence.coordinator.changeLogOptions
            var delay = options.reconnectDelay
            while true {
                let (coordinator, feed, start, position, limit) = (
                    sequence.coordinator, self.feed, sequence.start, self.position, sequence.pageSize
                )
                do {
                    let (page, resolved) = try await coordinator.offCooperativeThreads { () throws -> (HistoryPage, HistoryToken) in
                        feed.register(with: coordinator)
                        feed.clearWakeUp()
                        let token: HistoryToken
                        if let position {
                            token = position
                        } else if case .reader(let name) = start {
                            token = try coordinator.pool.withConnection {
                                try ChangeLog.acknowledgedToken(reader: name, on: $0)
                            }
                        } else {
                            token = try coordinator.currentHistoryToken()
                        }
                        let page = try coordinator.pool.withConnection {
                            try ChangeLog.readHistory(after: token, limit: limit, on: $0)
                        }
                        return (page, token)
                    }
                    if self.position == nil { token = resolved }
                    return page
                } catch let error as PostgresError where error.isConnectionError {
                    if feed.isClosed || Task.isCancelled { return nil }
                    coordinator.logger.warning("history read lost its connection, retrying in \(delay): \(error)")
                    try? await Task.sleep(for: delay)
                    delay = Swift.min(delay * 2, options.maximumReconnectDelay)
                } catch {
                    if feed.isClosed { return nil }
                    throw error
                }
            }
        }
    }
}

/// A history iterator's wake-up: set by the coordinator's change listener (each
/// notification, each reconnection), by closing the coordinator, by cancellation, and
/// by the poll timer; cleared before each read.
final class HistoryFeed: Sendable {
    private struct State {
        var wokenUp = false
        var isClosed = false
        var waiter: CheckedContinuation<Void, Never>?
        var registrations: [ObserverToken] = []
        var isRegistered = false
    }

    private let state = Mutex(State())

    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// Registers with the coordinator's listener (starting it, which `LISTEN`s before it
    /// returns) and its closing, once. Blocking.
    func register(with coordinator: StoreCoordinator) {
        let first = state.withLock { state -> Bool in
            defer { state.isRegistered = true }
            return !state.isRegistered
        }
        guard first else { return }
        let listener = coordinator.listener
        let id = listener.addWaker { [weak self] in self?.wakeUp() }
        let closing = coordinator.closeObservers.add { [weak self] in self?.close() }
        state.withLock { $0.registrations = [ObserverToken { listener.remove(id) }, closing] }
    }

    func wakeUp() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.wokenUp = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func clearWakeUp() {
        state.withLock { $0.wokenUp = false }
    }

    func close() {
        state.withLock { $0.isClosed = true }
        wakeUp()
    }

    /// Returns once woken up (at once when woken since the last clear), closed or
    /// cancelled, or after `timeout`.
    func waitForWakeUp(upTo timeout: Duration) async {
        let timer = Task { [weak self] in
            do {
                try await Task.sleep(for: timeout)
                self?.wakeUp()
            } catch {
                // Cancelled: the wait ended otherwise.
            }
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.wokenUp || state.isClosed { return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            wakeUp()
        }
    }
}
