import Testing

@testable import PGDataKit

/// `SaveContention`, the memory of which entities' saves met other transactions' work:
/// no server, instants given.
@Suite("Save contention memory")
struct SaveContentionTests {
    let start = ContinuousClock.now

    @Test func nothingIsContendedUntilASaveMetContention() {
        let contention = SaveContention()
        #expect(!contention.mayBeContended)
        #expect(!contention.isContended(["User"], at: start))
    }

    @Test func anEntityStaysContendedForTheWindowAfterItsSavesLastMetContention() {
        let contention = SaveContention()
        #expect(contention.window == .seconds(1))
        contention.noteContention(on: ["User"], at: start)
        #expect(contention.mayBeContended)
        #expect(contention.isContended(["User"], at: start + .milliseconds(999)))
        #expect(contention.isContended(["Post", "User"], at: start + .milliseconds(500)), "any of the save's entities")
        #expect(!contention.isContended(["Post"], at: start + .milliseconds(500)), "only the entities noted")
        #expect(!contention.isContended(["User"], at: start + .seconds(1)), "the window has passed")
        // Contention met again renews it.
        contention.noteContention(on: ["User"], at: start + .milliseconds(900))
        #expect(contention.isContended(["User"], at: start + .milliseconds(1_800)))
    }

    @Test func entitiesPastTheWindowAreForgotten() {
        let contention = SaveContention()
        contention.window = .milliseconds(100)
        contention.noteContention(on: ["User"], at: start)
        contention.noteContention(on: ["Post"], at: start + .milliseconds(200))
        #expect(!contention.isContended(["User"], at: start + .milliseconds(200)))
        #expect(contention.isContended(["Post"], at: start + .milliseconds(250)))
    }

    @Test func aWindowOfZeroTurnsTheMemoryOff() {
        let contention = SaveContention()
        contention.noteContention(on: ["User"], at: start)
        contention.window = .zero
        #expect(!contention.isContended(["User"], at: start))
        contention.noteContention(on: ["User"], at: start)
        #expect(!contention.isContended(["User"], at: start))
        contention.window = .seconds(-1)
        #expect(contention.window == .zero, "a negative window is none")
    }
}
