import Foundation
import PGDataKit
import Synchronization

/// `bouncer-worker POOLED_URL LISTEN_URL WORKER WORKERS ROUNDS SHARED BARRIER_FILE`: one
/// of several worker processes whose pool goes through PgBouncer (transaction mode) and
/// whose listener keeps a direct session. Its main context holds the SHARED users; once
/// the barrier file exists it saves ROUNDS times (a user of its own, and an update of a
/// shared user that the other workers update too), then waits for every other worker's
/// saves and compares what its main context holds with a fresh fetch:
///
///     result received=N distinct=N expected=N mismatches=0 users=N
func bouncerWorker(_ arguments: [String]) throws {
    guard arguments.count >= 9, let worker = Int(arguments[4]), let workers = Int(arguments[5]),
        let rounds = Int(arguments[6]), let shared = Int(arguments[7])
    else { fail("usage: bouncer-worker POOLED_URL LISTEN_URL WORKER WORKERS ROUNDS SHARED BARRIER_FILE") }
    let manager = try ContextManager(
        configuration: ConnectionConfiguration(arguments[2]), listenerConfiguration: ConnectionConfiguration(arguments[3]),
        entities: [HelperUser.self], maximumConnections: 3)
    defer { manager.close() }
    let received = Mutex<[Int64]>([])
    let token = manager.coordinator.observeRemoteChanges { record in received.withLock { $0.append(record.id) } }
    defer { token.cancel() }
    let main = manager.mainContext
    // Held for the whole run: other workers' updates must be merged into these objects.
    let held = try main.performAndWait { try main.fetchAll(HelperUser.self) }
    guard held.count == shared else { fail("expected \(shared) shared users, found \(held.count)") }
    emit("ready")
    let start = ContinuousClock.now
    while !FileManager.default.fileExists(atPath: arguments[8]) {
        if start.duration(to: .now) > .seconds(120) { fail("the barrier file never appeared") }
        usleep(2_000)
    }
    var retries = 0
    for round in 0..<rounds {
        for attempt in 0... {
            let context = manager.newPrivateContext()
            context.mergePolicy = .mergeByPropertyObjectTrump
            do {
                try context.performAndWait {
                    let own = HelperUser(context: context)
                    own.userID = "w\(worker)-\(round)"
                    own.age = round
                    let target = "shared-\((round + worker) % shared)"
                    guard let user = try HelperUser.first(in: context, where: "userID == %@", target) else {
                        fail("\(target) is missing")
                    }
                    user.name = "w\(worker)-r\(round)"
                    user.age = worker * 1_000 + round
                    try context.save()
                }
                break
            } catch let error as PostgresError where error.isTransient && attempt < 20 {
                retries += 1
                context.performAndWait { context.rollback() }
                usleep(UInt32.random(in: 1_000...20_000))
            }
        }
    }
    emit("saved \(rounds) retries=\(retries)")
    // Every other worker's saves, each once.
    let expected = (workers - 1) * rounds
    let waited = ContinuousClock.now
    while received.withLock({ $0.count }) < expected, waited.duration(to: .now) < .seconds(60) { usleep(5_000) }
    usleep(200_000)  // (a duplicate would arrive now)
    main.performAndWait {}  // the merges the listener queued are done
    let ids = received.withLock { $0 }
    let fresh = manager.newPrivateContext()
    let current = try fresh.performAndWait { () -> [String: (String?, Int?)] in
        var byID: [String: (String?, Int?)] = [:]
        for user in try fresh.fetchAll(HelperUser.self) { byID[user.userID] = (user.name, user.age) }
        return byID
    }
    let (mismatches, registered) = main.performAndWait { () -> (Int, Int) in
        var mismatches = 0
        for user in held {
            let now = current[user.userID]
            if now?.0 != user.name || now?.1 != user.age {
                mismatches += 1
                emit("mismatch \(user.userID): main has \(user.name ?? "nil")/\(user.age ?? -1), database \(String(describing: now))")
            }
        }
        return (mismatches, main.registeredObjects.count)
    }
    emit(
        "result received=\(ids.count) distinct=\(Set(ids).count) expected=\(expected) mismatches=\(mismatches) "
            + "users=\(current.count) registered=\(registered)")
}
