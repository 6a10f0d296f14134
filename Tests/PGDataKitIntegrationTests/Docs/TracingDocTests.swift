import Foundation
import Testing
import Tracing

@testable import PGDataKit

/// The Tracing article's examples, run against the recording tracer (`RecordingTracer`
/// runs the article's bootstrap line, once for the process).
@Suite("Docs: Tracing")
struct TracingDocTests {
    @Test func aRequestHandlersFetchIsAChildOfTheRequestsSpan() async throws {
        try await TracingTests.withTracedManager { manager, trace in
            try await TracingTests.seedUsers(1, in: manager)
            let userID = "u0"
            try await ServiceContext.withValue(trace.context) {
                let name = try await withSpan("GET /users/:id", ofKind: .server) { _ in
                    let context = manager.newPrivateContext()
                    return try await context.perform {
                        try User.first(in: context, where: "userID == %@", userID)?.name
                    }
                }
                #expect(name == nil)
            }
            let request = try #require(trace.spans.first { $0.operationName == "GET /users/:id" })
            let fetches = trace.spans(PGDataKitTracing.fetch)
            #expect(fetches.count == 1)
            #expect(fetches.first?.parent == request.id)
            #expect(fetches.first?.int(PGDataKitTracing.returnedRows) == 1)
        }
    }

    @Test func theArticlesBlocksAreTested() throws {
        let missing = try DocSnippets.blocksMissing(
            from: #filePath, in: "\(DocSnippets.catalog)/Tracing.md")
        // The bootstrap line is RecordingTracer's (it may run once per process).
        #expect(missing.count == 1)
        #expect(missing.first?.hasPrefix("InstrumentationSystem.bootstrap(tracer)") == true)
    }
}
