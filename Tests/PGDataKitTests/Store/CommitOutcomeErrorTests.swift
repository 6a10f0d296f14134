import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Errors of a save whose COMMIT went unanswered, without a server")
struct CommitOutcomeErrorTests {
    /// A lost connection the library made sure did not commit is transient and says so;
    /// a plain one is not.
    @Test func aLostConnectionThatDidNotCommitIsTransient() {
        let lost = PostgresError(kind: .connectionLost, message: "gone", statement: "COMMIT")
        #expect(!lost.isTransient && !lost.transactionDidNotCommit)
        let settled = lost.notCommitted()
        #expect(settled.isTransient && settled.transactionDidNotCommit && settled.kind == .connectionLost)
        #expect(settled.description == "connection lost: gone — in: COMMIT — the transaction did not commit")
        // A client-side failure (the pipeline's "cannot exit pipeline mode while busy")
        // becomes the lost connection it is.
        let client = PostgresError(kind: .client, message: "cannot exit pipeline mode while busy").notCommitted()
        #expect(client.kind == .connectionLost && client.isConnectionError && client.isTransient)
        // A terminated backend keeps its SQLSTATE.
        let terminated = PostgresError(kind: .server, sqlState: .adminShutdown, message: "terminating").notCommitted()
        #expect(terminated.sqlState == .adminShutdown && terminated.isTransient)
    }

    /// The unknown outcome names the transaction and how to check it, is not transient,
    /// and shows no bound value.
    @Test func anUnknownOutcomeNamesItsTransaction() {
        var commitError = PostgresError(kind: .connectionLost, message: "server closed the connection", statement: "COMMIT")
        commitError.parameterDescriptions = ["'secret@example.com'"]
        let error = SaveOutcomeUnknownError(
            transactionID: 4_242, code: .serverUnreachable, commitError: commitError,
            lookupError: PostgresError(kind: .connectionFailed, message: "connection refused"))
        let text = "\(error)"
        #expect(text.contains("4242") && text.contains("pg_xact_status('4242'::xid8)"))
        #expect(text.contains("could not be reached") && text.contains("connection refused"))
        #expect(!text.contains("secret"))
        #expect((error as any Error as? PostgresError) == nil)  // units of work never see it as transient
        #expect(error.changeRecordID == nil)
        // A save that wrote a change record: the record is what tells, also after a
        // failover (when the transaction id may belong to another transaction).
        let recorded = SaveOutcomeUnknownError(
            transactionID: 4_242, code: .serverUnreachable, commitError: commitError, changeRecordID: 77)
        #expect("\(recorded)".contains("record 77 with transaction_id 4242"))
        #expect(!"\(recorded)".contains("secret"))
    }
}
