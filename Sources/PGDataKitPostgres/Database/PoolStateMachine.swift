/// The bookkeeping of a connection pool, without I/O, locks or clocks: which connections
/// are idle, how many are open, who waits for one and in which order.
///
/// `ConnectionPool` holds it under its lock and tells it each event: a borrower asks
/// (`acquire(waiter:)`), a connection comes back (`released(_:)`), one is dropped or could
/// not be opened (`placeFreed()`), a waiter gives up (`stoppedWaiting(_:)`), the pool
/// closes (`close()`). It answers what to do; the pool does it outside the lock (checks a
/// connection, opens one, wakes a thread, resumes a task). Waiters are served first come,
/// first served, whether they are threads or tasks: the machine does not know which.
///
/// A place is what the pool may open a connection in: `open` counts connections open and
/// places handed out to be opened, never more than `maximum`.
///
/// For example, a pool of one with two borrowers:
///
/// ```swift
/// var machine = PoolStateMachine<String>(maximum: 1)
/// machine.acquire(waiter: 1)       // .open: the caller opens a connection in the place
/// machine.acquire(waiter: 2)       // .wait: nothing idle, no place left
/// machine.released("c1")           // .serve(waiter: 2, with: .connection("c1"))
/// machine.released("c1")           // .keep: nobody waits, it is idle now
/// ```
struct PoolStateMachine<Connection> {
    /// What a waiter is handed once served.
    enum Lease {
        /// An idle connection, to be checked before use.
        case connection(Connection)
        /// A place: open a new connection in it (report `placeFreed()` when that fails).
        case place
    }

    /// What the borrower does after `acquire(waiter:)`.
    enum Action {
        /// Use this idle connection (check it first; a broken one is replaced in its place).
        case use(Connection)
        /// Open a new connection in the place just reserved.
        case open
        /// Wait until served (`Handover.serve`), or stop waiting (`stoppedWaiting(_:)`).
        case wait
        /// The pool is closed: fail the borrower.
        case refuse
    }

    /// What the pool does after a connection or a place came back.
    enum Handover {
        /// Wake this waiter with what it is handed.
        case serve(waiter: UInt64, with: Lease)
        /// Nothing more to do: the connection stays idle, or the place stays free.
        case keep
        /// The pool is closed: close this connection.
        case close(Connection)
    }

    /// The most connections open at once (at least 1).
    let maximum: Int
    /// Connections open and places handed out to be opened.
    private(set) var open = 0
    /// Connections waiting to be borrowed, the most recently returned last.
    private(set) var idle: [Connection] = []
    /// Whether `close()` was called.
    private(set) var isClosed = false
    /// Waiters in arrival order, from `head` on; some may have stopped waiting.
    private var queue: [UInt64] = []
    private var head = 0
    /// The waiters still waiting.
    private var waiting: Set<UInt64> = []

    /// A pool of at most `maximum` connections (at least 1), none open yet.
    init(maximum: Int) {
        self.maximum = max(1, maximum)
    }

    /// How many borrowers wait.
    var waiterCount: Int { waiting.count }

    /// A borrower, `waiter` (an id unique among those waiting), asks for a connection.
    /// `.wait` puts it at the end of the queue.
    mutating func acquire(waiter: UInt64) -> Action {
        if isClosed { return .refuse }
        // Served first come, first served: nobody overtakes a waiter.
        if waiting.isEmpty {
            if let connection = idle.popLast() { return .use(connection) }
            if open < maximum {
                open += 1
                return .open
            }
        }
        queue.append(waiter)
        waiting.insert(waiter)
        return .wait
    }

    /// A borrowed connection comes back healthy.
    mutating func released(_ connection: Connection) -> Handover {
        if isClosed {
            open -= 1
            return .close(connection)
        }
        if let waiter = nextWaiter() { return .serve(waiter: waiter, with: .connection(connection)) }
        idle.append(connection)
        return .keep
    }

    /// A connection was closed for good (broken, or returned mid-transaction and not
    /// rolled back), or one could not be opened: its place is free for a waiter.
    mutating func placeFreed() -> Handover {
        if !isClosed, let waiter = nextWaiter() { return .serve(waiter: waiter, with: .place) }
        open -= 1
        return .keep
    }

    /// A waiter gives up (timed out, cancelled).
    ///
    /// - Returns: whether it was still waiting; `false` when it was served just before,
    ///   so what it was handed is on its way and must be taken (and given back).
    mutating func stoppedWaiting(_ waiter: UInt64) -> Bool {
        waiting.remove(waiter) != nil
    }

    /// The pool closes: every waiter is refused, the idle connections are to be closed.
    mutating func close() -> (waiters: [UInt64], idle: [Connection]) {
        isClosed = true
        let waiters = queue[head...].filter { waiting.contains($0) }
        queue.removeAll()
        head = 0
        waiting.removeAll()
        let connections = idle
        idle.removeAll()
        open -= connections.count
        return (waiters, connections)
    }

    /// The first waiter still waiting, taken out of the queue.
    private mutating func nextWaiter() -> UInt64? {
        while head < queue.count {
            let waiter = queue[head]
            head += 1
            if head == queue.count || head > 1_024 {
                queue.removeFirst(head)
                head = 0
            }
            if waiting.remove(waiter) != nil { return waiter }
        }
        return nil
    }
}

extension PoolStateMachine.Lease: Sendable where Connection: Sendable {}
extension PoolStateMachine.Lease: Equatable where Connection: Equatable {}
extension PoolStateMachine.Action: Equatable where Connection: Equatable {}
extension PoolStateMachine.Handover: Equatable where Connection: Equatable {}
