import Dispatch
import PGDataKitPostgres

extension StoreCoordinator {
    /// Runs blocking database work for async code: waits for a pooled connection
    /// suspended (in line with every other borrower, see `ConnectionPool`), then runs
    /// `body` on a thread of Dispatch's pool, never a cooperative one; the connections
    /// `body` borrows from the pool (`pool.withConnection`) are the one leased, so it
    /// never waits again.
    ///
    /// - Throws: `CancellationError` when the task is cancelled while it waits,
    ///   `ConnectionPoolError`, or what `body` throws.
    func offCooperativeThreads<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let lease = try await pool.lease()
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try ConnectionPool.holding(lease, body) })
            }
        }
    }
}
