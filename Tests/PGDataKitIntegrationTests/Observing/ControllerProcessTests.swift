import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Object controllers with real OS processes (`pgdatakit-test-helper controller-save` and
/// `controller-watch`): saves of another process reach a controller through the change
/// log, and a controller whose listener is killed mid-stream catches up.
@Suite("Object controllers across processes", .heavy)
struct ControllerProcessTests {
    typealias T = ControllerTesting

    /// One save in a helper process with the given operations (see `controllerSave`).
    func saveInAnotherProcess(_ configuration: ConnectionConfiguration, _ operations: [String]) throws {
        let url = try #require(configuration.renderedConnectionString())
        let outcome = try CLI.runHelper(["controller-save", url] + operations)
        #expect(
            outcome.status == 0 && outcome.output.contains("saved"),
            "status \(outcome.status): \(outcome.output)\nstderr: \(outcome.error.prefix(2_500))")
    }

    /// A change set a `controller-watch` process printed.
    struct WatchedChange {
        var number: Int
        var deleted: [Int] = []
        var inserted: [Int] = []
        var updated: [Int] = []
        var moved: [ControllerMove] = []
        var large = false
        var objects: [String] = []

        init?(_ line: String) {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, parts[0] == "change", let number = Int(parts[1]) else { return nil }
            self.number = number
            func numbers(_ text: Substring) -> [Int] { text.split(separator: ",").compactMap { Int($0) } }
            for part in parts.dropFirst(2) {
                let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard pair.count == 2 else { continue }
                switch pair[0] {
                case "deleted": deleted = numbers(pair[1])
                case "inserted": inserted = numbers(pair[1])
                case "updated": updated = numbers(pair[1])
                case "moved":
                    moved = pair[1].split(separator: ",").compactMap { move in
                        let ends = move.split(separator: ">").compactMap { Int($0) }
                        return ends.count == 2 ? ControllerMove(from: ends[0], to: ends[1]) : nil
                    }
                case "large": large = pair[1] == "1"
                case "objects": objects = pair[1].split(separator: ",").map(String.init)
                default: break
                }
            }
        }

        /// The old objects with this change set applied as a list view applies it.
        func replayed(on old: [String]) -> [String] {
            var array = old
            let removed = IndexSet(deleted).union(IndexSet(moved.map(\.from)))
            for index in removed.reversed() where index < array.count { array.remove(at: index) }
            let added = IndexSet(inserted).union(IndexSet(moved.map(\.to)))
            for index in added where index < objects.count && index <= array.count { array.insert(objects[index], at: index) }
            return array
        }
    }

    @Test func insertUpdateDeleteAndDeleteAllOfAnotherProcessGiveExactIndexSets() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            try T.insertUsers(manager, [("a", 20), ("b", 30), ("c", 40), ("d", 50)])
            let main = manager.mainContext
            main.performAndWait {}
            let request = FetchRequest<User>(
                predicate: try FetchPredicate(format: "age >= 30"), sortDescriptors: [FetchSortDescriptor("age")])
            let controller = ManagedObjectController(fetchRequest: request, context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }

            let steps: [(operations: [String], deleted: IndexSet, inserted: IndexSet, updated: IndexSet, moved: [ControllerMove], after: [String])] = [
                (["insert", "e", "35", "insert", "f", "10"], [], [1], [], [], ["b", "e", "c", "d"]),
                (["age", "a", "45"], [], [3], [], [], ["b", "e", "c", "a", "d"]),
                (["age", "c", "25"], [2], [], [], [], ["b", "e", "a", "d"]),
                (["age", "b", "60"], [], [], [3], [ControllerMove(from: 0, to: 3)], ["e", "a", "d", "b"]),
                (["delete", "d"], [2], [], [], [], ["e", "a", "b"]),
                (["delete-all", "age > 40"], [1, 2], [], [], [], ["e"]),
            ]
            for (number, step) in steps.enumerated() {
                try saveInAnotherProcess(configuration, step.operations)
                try T.wait("the save of \(step.operations) arrives", on: main) { recorder.changeSets.count == number + 2 }
                let changes = main.performAndWait { recorder.changeSets[number + 1] }
                #expect(changes.deleted == step.deleted, "\(step.operations)")
                #expect(changes.inserted == step.inserted, "\(step.operations)")
                #expect(changes.updated == step.updated, "\(step.operations)")
                #expect(changes.moved == step.moved, "\(step.operations)")
                #expect(T.userIDs(controller) == step.after)
                #expect(main.performAndWait { controller.objects.map(\.objectID) } == (try T.freshIDs(request, in: main)))
            }
            #expect(main.performAndWait { recorder.offQueueCalls } == 0)
        }
    }

    @Test func aThousandUpdatesOfAnotherProcessAreOneLargeChangeAndOneMembershipStatement() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            try T.insertUsers(manager, (0..<1000).map { ("m\($0)", 20) })
            let main = manager.mainContext
            main.performAndWait {}
            let request = FetchRequest<User>(
                predicate: try FetchPredicate(format: "age < 50"), sortDescriptors: [FetchSortDescriptor("userID")])
            let controller = ManagedObjectController(fetchRequest: request, context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            let statements = manager.coordinator.statementCount
            try saveInAnotherProcess(configuration, ["age-where", "age == 20", "21"])
            try T.wait("the save arrives", on: main) { recorder.changeSets.count == 2 }
            usleep(100_000)
            #expect(manager.coordinator.statementCount - statements == 2, "one refresh, one membership statement")
            let changes = main.performAndWait { recorder.changeSets }
            #expect(changes.count == 2)
            #expect(changes.last?.isLargeChange == true && changes.last?.updated.count == 1000)
            #expect(main.performAndWait { recorder.calls.filter { $0.hasPrefix("delegate updated") }.count } == 1)
        }
    }

    /// The watching process holds the controller; this process saves in batches and, now
    /// and then, terminates the watcher's listener session (by the backend pid the
    /// watcher reports, not by application name: this process and the watcher's helper
    /// manager have listeners too) just before a batch, so that batch's notifications
    /// are lost (the watcher waits half a second before reconnecting) and only the
    /// catch-up after the reconnect brings them. After every batch the watcher's objects must
    /// equal a fresh fetch here, and every change set it printed must replay onto the
    /// objects before it.
    @Test func aControllerWhoseListenerIsKilledMidStreamEndsEqualToAFreshFetch() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            try T.insertUsers(manager, (0..<30).map { ("w\($0)", $0 * 3) })
            let watcher = try HelperProcess.start("controller-watch", configuration, ["age >= 40", "age"])
            defer { watcher.stop() }
            try watcher.waitUntil("the watcher is ready") { lines in lines.contains { $0.hasPrefix("ready ") } }
            var listener = try #require(
                watcher.lines.first { $0.hasPrefix("ready ") }.flatMap { Int32($0.dropFirst(6)) })
            let admin = try Connection(configuration)
            defer { admin.close() }
            let request = FetchRequest<User>(
                predicate: try FetchPredicate(format: "age >= 40"), sortDescriptors: [FetchSortDescriptor("age")])
            var random = SeededRandom(seed: 42)
            var alive = (0..<30).map { "w\($0)" }
            var nextID = 30
            var kills = 0
            var savedWhileDisconnected = 0
            for batch in 0..<12 {
                if batch % 4 == 1 {
                    let killed = try admin.query("SELECT pg_terminate_backend($1)", [listener])[0].decode(Bool.self, at: 0)
                    #expect(killed, "the watcher's listener \(listener) was terminated")
                    kills += 1
                }
                // Three saves while (after a kill) the listener is reconnecting.
                let fresh = (nextID..<(nextID + 3)).map { "w\($0)" }
                nextID += 3
                try T.insertUsers(manager, fresh.map { ($0, Int.random(in: 0...90, using: &random)) })
                alive += fresh
                let changed = (0..<4).compactMap { _ in alive.randomElement(using: &random) }
                try T.updateUsers(manager, Array(Set(changed))) { $0.age = Int.random(in: 0...90, using: &random) }
                if let victim = alive.randomElement(using: &random) {
                    try T.save(manager) { context in
                        try #require(try User.first(in: context, where: "userID == %@", victim)).delete()
                    }
                    alive.removeAll { $0 == victim }
                }
                if batch % 4 == 1 && !watcher.lines.contains(where: { $0.hasPrefix("listener ") && Int32($0.dropFirst(9)) != listener }) {
                    savedWhileDisconnected += 1  // these saves can only arrive through the catch-up
                }
                let expected = try manager.mainContext.performAndWait {
                    try manager.mainContext.fetch(request).map(\.userID)
                }
                try watcher.waitUntil("the watcher equals a fresh fetch after batch \(batch)") { lines in
                    lines.last { $0.hasPrefix("change ") }.flatMap(WatchedChange.init)?.objects == expected
                }
                if batch % 4 == 1 {
                    let old = listener
                    try watcher.waitUntil("the watcher's listener reconnected") { lines in
                        lines.contains { $0.hasPrefix("listener ") && Int32($0.dropFirst(9)) != old }
                    }
                    listener = try #require(watcher.lines.last { $0.hasPrefix("listener ") }.flatMap { Int32($0.dropFirst(9)) })
                }
            }
            #expect(kills == 3)
            #expect(savedWhileDisconnected >= 1, "a batch was saved while the watcher's listener was down")
            let changes = watcher.lines.compactMap(WatchedChange.init)
            #expect(changes.map(\.number) == Array(1...changes.count), "no change set lost or doubled in the output")
            for (previous, next) in zip(changes, changes.dropFirst()) {
                #expect(next.replayed(on: previous.objects) == next.objects, "change \(next.number) replays")
            }
            #expect(!watcher.lines.contains { $0.hasPrefix("error ") })
        }
    }
}

/// SplitMix64, for reproducible random batches.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
