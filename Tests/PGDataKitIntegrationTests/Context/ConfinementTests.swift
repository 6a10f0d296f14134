import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Confinement: contexts and objects off their queue stop a debug build")
struct ConfinementTests {
    #if DEBUG
        @Test(arguments: ["off-queue", "off-queue-object"])
        func offQueueUseStopsLoudly(_ command: String) throws {
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let url = try #require(configuration.renderedConnectionString())
                let outcome = try CLI.runHelper([command, url])
                #expect(outcome.status != 0)
                #expect(!outcome.output.contains("not stopped"))
                #expect(outcome.error.contains("used off its queue"), "\(outcome.error)")
            }
        }
    #endif
}
