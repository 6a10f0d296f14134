import PGDataKit
import Testing

@Suite("PostgresError")
struct PostgresErrorTests {
    /// A caller's switch over the kind has a default, so new kinds cannot break it.
    func summary(_ error: PostgresError) -> String {
        switch error.kind {
        case .server: return "server \(error.sqlState?.rawValue ?? "")"
        case .connectionLost, .connectionFailed, .connectionClosed: return "connection"
        default: return "other \(error.kind)"
        }
    }

    @Test func kindsMatchInASwitchWithADefault() {
        #expect(summary(PostgresError(kind: .server, sqlState: .uniqueViolation, message: "dup")) == "server 23505")
        #expect(summary(PostgresError(kind: .connectionLost, message: "gone")) == "connection")
        #expect(summary(PostgresError(kind: .client, message: "oom")) == "other client")
    }

    @Test func kindsCompareAndDescribeThemselves() {
        let lost = PostgresError(kind: .connectionLost, message: "gone")
        #expect(lost.kind == .connectionLost)
        #expect(lost.kind != .connectionClosed)
        #expect(lost.isConnectionError)
        #expect(!PostgresError(kind: .server, sqlState: .uniqueViolation, message: "dup").isConnectionError)
        #expect("\(PostgresError.Kind.connectionLost)" == "connectionLost")
        #expect(lost.description == "connection lost: gone")
    }
}
