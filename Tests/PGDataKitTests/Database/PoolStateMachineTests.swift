import Testing

@testable import PGDataKitPostgres

/// The pool's bookkeeping, event by event, with no server: connections are strings, and
/// each test plays borrowers and returns and checks what the machine answers.
@Suite("PoolStateMachine without a server")
struct PoolStateMachineTests {
    typealias Machine = PoolStateMachine<String>

    @Test func opensUpToTheMaximumThenQueues() {
        var machine = Machine(maximum: 2)
        #expect(machine.acquire(waiter: 1) == .open)
        #expect(machine.acquire(waiter: 2) == .open)
        #expect(machine.acquire(waiter: 3) == .wait)
        #expect(machine.open == 2)
        #expect(machine.waiterCount == 1)
    }

    @Test func aReturnedConnectionGoesToTheFirstWaiterThenIdle() {
        var machine = Machine(maximum: 1)
        #expect(machine.acquire(waiter: 1) == .open)
        #expect(machine.acquire(waiter: 2) == .wait)
        #expect(machine.acquire(waiter: 3) == .wait)
        #expect(machine.released("c") == .serve(waiter: 2, with: .connection("c")))
        #expect(machine.released("c") == .serve(waiter: 3, with: .connection("c")))
        #expect(machine.released("c") == .keep)
        #expect(machine.idle == ["c"])
        #expect(machine.acquire(waiter: 4) == .use("c"))
        #expect(machine.idle.isEmpty)
    }

    @Test func nobodyOvertakesAWaiter() {
        var machine = Machine(maximum: 1)
        _ = machine.acquire(waiter: 1)
        #expect(machine.acquire(waiter: 2) == .wait)
        // A place freed goes to the waiter, not to the next borrower.
        #expect(machine.placeFreed() == .serve(waiter: 2, with: .place))
        #expect(machine.open == 1)
        #expect(machine.acquire(waiter: 3) == .wait)
        #expect(machine.released("c") == .serve(waiter: 3, with: .connection("c")))
    }

    @Test func aFreedPlaceWithNobodyWaitingLowersTheCount() {
        var machine = Machine(maximum: 1)
        #expect(machine.acquire(waiter: 1) == .open)
        #expect(machine.placeFreed() == .keep)
        #expect(machine.open == 0)
        #expect(machine.acquire(waiter: 2) == .open)
    }

    @Test func aWaiterThatStoppedIsSkipped() {
        var machine = Machine(maximum: 1)
        _ = machine.acquire(waiter: 1)
        _ = machine.acquire(waiter: 2)
        _ = machine.acquire(waiter: 3)
        #expect(machine.stoppedWaiting(2) == true)
        #expect(machine.waiterCount == 1)
        #expect(machine.released("c") == .serve(waiter: 3, with: .connection("c")))
        // Served already: stopping now says so (what it was handed must be taken).
        #expect(machine.stoppedWaiting(3) == false)
        #expect(machine.stoppedWaiting(99) == false)
    }

    @Test func closingRefusesWaitersAndBorrowersAndClosesReturns() {
        var machine = Machine(maximum: 2)
        _ = machine.acquire(waiter: 1)
        _ = machine.acquire(waiter: 2)
        #expect(machine.released("a") == .keep)
        _ = machine.acquire(waiter: 3)  // takes "a"
        _ = machine.acquire(waiter: 4)
        _ = machine.acquire(waiter: 5)
        #expect(machine.stoppedWaiting(4) == true)
        #expect(machine.released("b") == .serve(waiter: 5, with: .connection("b")))
        #expect(machine.released("b") == .keep)
        _ = machine.acquire(waiter: 6)  // takes "b"
        _ = machine.acquire(waiter: 7)
        let (waiters, idle) = machine.close()
        #expect(waiters == [7])
        #expect(idle.isEmpty)
        #expect(machine.isClosed)
        #expect(machine.acquire(waiter: 8) == .refuse)
        #expect(machine.released("a") == .close("a"))
        #expect(machine.placeFreed() == .keep)
        #expect(machine.open == 0)
    }

    @Test func closingHandsBackTheIdleConnections() {
        var machine = Machine(maximum: 3)
        for waiter in 1...3 { _ = machine.acquire(waiter: UInt64(waiter)) }
        _ = machine.released("a")
        _ = machine.released("b")
        let (waiters, idle) = machine.close()
        #expect(waiters.isEmpty)
        #expect(Set(idle) == ["a", "b"])
        #expect(machine.open == 1)
    }

    /// Thousands of waiters in and out, some giving up: each is served once, in order, and
    /// the counts come back to where they started.
    @Test func manyWaitersAreServedOnceInArrivalOrder() {
        var machine = Machine(maximum: 3)
        for waiter in 1...3 { #expect(machine.acquire(waiter: UInt64(waiter)) == .open) }
        var served: [UInt64] = []
        var expected: [UInt64] = []
        for waiter in UInt64(4)...5_000 {
            #expect(machine.acquire(waiter: waiter) == .wait)
            if waiter % 7 == 0 { #expect(machine.stoppedWaiting(waiter) == true) } else { expected.append(waiter) }
        }
        while machine.waiterCount > 0 {
            guard case .serve(let waiter, .connection("c")) = machine.released("c") else {
                Issue.record("a waiter was not served")
                return
            }
            served.append(waiter)
        }
        #expect(served == expected)
        for _ in 0..<3 { #expect(machine.released("c") == .keep) }
        #expect(machine.idle.count == 3)
        #expect(machine.open == 3)
    }
}
