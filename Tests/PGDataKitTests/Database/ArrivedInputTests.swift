import Testing

@testable import PGDataKitPostgres

/// `Connection.readArrivedInput`, the loop behind `isUsable` (which a pool runs at every
/// acquire and release): it reads while input is there and checks no more once the
/// socket is quiet.
@Suite("Connection: reading input that has arrived")
struct ArrivedInputTests {
    /// Runs the loop over a list of readiness answers (`false` once they run out) and
    /// read outcomes (`true` once they run out); returns its result and both counts.
    func run(readable answers: [Bool], reads outcomes: [Bool] = [], limit: Int = 4) -> (Bool, checks: Int, reads: Int) {
        var checks = 0
        var reads = 0
        let result = Connection.readArrivedInput(limit: limit) {
            defer { checks += 1 }
            return checks < answers.count ? answers[checks] : false
        } read: {
            defer { reads += 1 }
            return reads < outcomes.count ? outcomes[reads] : true
        }
        return (result, checks, reads)
    }

    @Test func aQuietSocketIsCheckedOnce() {
        let (result, checks, reads) = run(readable: [false, true, true, true])
        #expect(result)
        #expect(checks == 1)
        #expect(reads == 0)
    }

    @Test func inputIsReadUntilTheSocketIsQuiet() {
        let (result, checks, reads) = run(readable: [true, true, false, true])
        #expect(result)
        #expect(checks == 3)
        #expect(reads == 2)
    }

    @Test func readsStopAtTheLimit() {
        let (result, checks, reads) = run(readable: Array(repeating: true, count: 10))
        #expect(result)
        #expect(checks == 4)
        #expect(reads == 4)
    }

    @Test func aFailedReadEndsTheLoop() {
        let (result, checks, reads) = run(readable: [true, true, true], reads: [true, false])
        #expect(!result)
        #expect(checks == 2)
        #expect(reads == 2)
    }
}
