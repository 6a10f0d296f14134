import Foundation

extension ManagedObjectContext {
    /// Runs `body` (on the context's queue) and, when it fails on a lost or refused
    /// connection — a terminated backend, a server restarting —, runs it again after a
    /// pause (50 ms, doubling to 1 s) for up to `seconds`.
    ///
    /// For the work the context does on its own behalf, after the fact, with nobody to
    /// hand an error to: merging a save, asking which changed objects match a
    /// controller. Dropping that work would leave the context (or its controllers)
    /// different from the database until the same objects change again; waiting on the
    /// queue keeps what comes after it in order. `body` must be safe to run again (reads
    /// and refreshes are). Other errors are thrown at once.
    ///
    /// Only a main context retries: it borrows a pooled connection per use. A private
    /// context's work belongs to its transaction, whose snapshot a lost connection ended:
    /// running it again would silently begin another one, so it throws at once.
    func retryingLostConnections<T>(_ what: String, seconds: Int = 30, _ body: () throws -> T) throws -> T {
        guard concurrencyType == .main else { return try body() }
        let deadline = ContinuousClock.now + .seconds(seconds)
        var pause = 0.05
        while true {
            do {
                return try body()
            } catch let error as PostgresError where error.isConnectionError && ContinuousClock.now < deadline {
                logger.warning("\(what) failed, trying again in \(pause) s: \(error)")
                Thread.sleep(forTimeInterval: pause)
                pause = min(pause * 2, 1)
            }
        }
    }
}
