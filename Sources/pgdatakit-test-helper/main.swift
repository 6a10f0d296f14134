// A helper program for the integration tests: behaviour that needs a process of its own
// (a crash on purpose, another worker process watching or writing) runs here.
import CoreMetrics
import Foundation
import MetricsTestKit
import PGDataKit

final class HelperUser: ManagedObject {
    override class var entityName: String { "User" }
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
}

/// Writes one line to standard output at once (unbuffered: the tests read the file
/// while this process runs).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(2)
}

let usage = """
    usage: pgdatakit-test-helper MODE DATABASE_URL [ARGUMENTS…]
      off-queue | off-queue-object | watch | own-saves | topics-watch | specimen-watch | content-watch DATABASE_URL
      burst DATABASE_URL PREFIX COUNT [PAUSE_MS]
      history-consume DATABASE_URL READER OUTPUT_FILE
      controller-save DATABASE_URL OPERATION…   (insert ID AGE, age ID AGE, delete ID, age-where FORMAT AGE, delete-all FORMAT)
      controller-watch DATABASE_URL FORMAT SORTKEY
      content-save DATABASE_URL OPERATION…   (article TITLE RANK SLUG, video TITLE RANK SECONDS, rank TITLE RANK, delete TITLE)
      import-race DATABASE_URL WORKER BARRIER_FILE
      import-memory DATABASE_URL COUNT BATCH
      metrics DATABASE_URL
      bouncer-worker POOLED_URL LISTEN_URL WORKER WORKERS ROUNDS SHARED BARRIER_FILE
      failover-worker DATABASE_URL WORKER COUNTERS PHASE_DIRECTORY POST_FAILOVER_SAVES
      service-sigterm DATABASE_URL PREFIX WRITERS
    """
let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail(usage) }
if arguments[1] == "metrics" {
    // The metrics backend must be in place before the first coordinator is made.
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    do { try metricsRun(metrics, url: arguments[2]) } catch { fail("\(error)") }
    exit(0)
}
if arguments[1] == "specimen-watch" {
    // Another worker whose main context holds every specimen (an attribute of each type)
    // and prints their export after each merge of another process's save. Its database
    // has only the generated schema of the every-type tests: no manager of users.
    specimenWatch(arguments[2])
}
if arguments[1] == "content-watch" {
    // Another worker whose main context holds an entity hierarchy's objects (articles and
    // videos in one table) and prints them after each merge. Its database has only the
    // generated schema of the inheritance tests.
    contentWatch(arguments[2])
}
if arguments[1] == "content-save" { contentSave(arguments[2], Array(arguments.dropFirst(3))) }
if arguments[1] == "bouncer-worker" {
    // Pool and listener go to different places: its own manager.
    do { try bouncerWorker(arguments) } catch { fail("\(error)") }
    exit(0)
}
/// The relay the tests ask for: `PGDATAKIT_TEST_RELAY` is `off` or a directory (unset:
/// the library's default).
func relayOption() -> ListenerRelay {
    switch ProcessInfo.processInfo.environment["PGDATAKIT_TEST_RELAY"] {
    case nil: return .automatic
    case "off": return .off
    case let directory?: return .directory(directory)
    }
}
if arguments[1] == "service-sigterm" { serviceSigterm(arguments) }
if arguments[1] == "history-consume" {
    // A consumer that keeps no context: a coordinator without entities.
    historyConsume(arguments)
}
var changeLogOptions = ChangeLogOptions(relay: relayOption())
// A relay that did not answer within its window (a loaded machine) is tried again after
// a second, not after the default half minute: the tests wait for the switch.
changeLogOptions.relayRetryDelay = .seconds(1)
let manager = try ContextManager(
    configuration: ConnectionConfiguration(arguments[2]), entities: [HelperUser.self], changeLog: changeLogOptions)
switch arguments[1] {
case "off-queue":
    // Using a context off its queue must stop a debug build loudly.
    _ = try manager.mainContext.fetchAll(HelperUser.self)
    print("not stopped")
case "off-queue-object":
    let user = manager.mainContext.performAndWait { () -> HelperUser in
        let user = HelperUser(context: manager.mainContext)
        user.userID = "x"
        return user
    }
    user.name = "touched off the queue"
    print("not stopped")
case "watch":
    // Another worker: its main context merges every other process's save. Prints each
    // change record the listener reads, and the main context's state after each merge.
    watch()
case "burst":
    // A writer: COUNT saves of one new user each, one after another (PAUSE_MS apart).
    guard arguments.count >= 5, let count = Int(arguments[4]) else { fail(usage) }
    let pause = arguments.count >= 6 ? UInt32(arguments[5]) ?? 0 : 0
    let context = manager.newPrivateContext()
    try context.performAndWait {
        for index in 0..<count {
            let user = HelperUser(context: context)
            user.userID = "\(arguments[3])-\(index)"
            user.age = index
            try context.save()
            if pause > 0 { usleep(pause * 1_000) }
        }
    }
    emit("done")
case "topics-watch":
    // Another worker whose main context holds topics and reads their stories after
    // each merge (many-to-many relationships across processes).
    topicsWatch(arguments[2])
case "unannounced-save":
    // A writer that dies between its commit and its notification: the notifier holds
    // the payload back, the save commits, the test kills this process (SIGKILL).
    guard arguments.count >= 4 else { fail(usage) }
    manager.coordinator.notifier.hold(true)
    let context = manager.newPrivateContext()
    try context.performAndWait {
        HelperUser(context: context).userID = arguments[3]
        try context.save()
    }
    emit("committed")
    while true { sleep(60) }
case "own-saves":
    // Saves once, then waits for one save of another process (which commits after this
    // one, so the listener has read past this process's own record) and reports how
    // often the main context merged and which records the listener delivered.
    ownSaves()
case "controller-save":
    controllerSave(manager, Array(arguments.dropFirst(3)))
case "controller-watch":
    controllerWatch(arguments[2], Array(arguments.dropFirst(3)))
case "import-race":
    importRace(manager, arguments)
case "import-memory":
    importMemory(manager, arguments)
case "failover-worker":
    failoverWorker(manager, arguments)
default:
    fail("unknown command \(arguments[1])")
}
// Closed before the process exits: a thread of the listener, relay or notifier that opens
// a connection while `exit` runs can abort the process inside libgssapi_krb5, whose
// mutexes are destroyed at exit (CI: an `import-race` worker, status 134 after "done").
manager.close()

func ownSaves() {
    let merges = Counter()
    let records = Counter()
    let mergeToken = manager.mainContext.observeObjectsDidChange { _ in merges.add() }
    let recordToken = manager.coordinator.observeRemoteChanges { _ in records.add() }
    let context = manager.newPrivateContext()
    do {
        try context.performAndWait {
            HelperUser(context: context).userID = "own"
            try context.save()
        }
    } catch {
        fail("\(error)")
    }
    emit("saved")
    let start = ContinuousClock.now
    while records.value == 0 {
        if start.duration(to: .now) > .seconds(20) { fail("no record of another process arrived") }
        usleep(2_000)
    }
    usleep(200_000)
    manager.mainContext.performAndWait {}
    emit("merges=\(merges.value) records=\(records.value)")
    withExtendedLifetime((mergeToken, recordToken)) {}
}

/// A counter shared between queues.
final class Counter: @unchecked Sendable {
    // Safe: every access holds `lock`.
    private let lock = NSLock()
    private var count = 0

    func add() {
        lock.lock()
        count += 1
        lock.unlock()
    }

    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}

func watch() -> Never {
    let main = manager.mainContext
    let recordToken = manager.coordinator.observeRemoteChanges { record in
        emit(
            "record \(record.id) pid=\(record.originProcessID) inserted=\(record.changes.inserted.count) "
                + "updated=\(record.changes.updated.count) deleted=\(record.changes.deleted.count)")
    }
    // Hold every user, so that updates are refreshed in place and deletions mark them.
    let held = HeldObjects()
    @Sendable func report(_ changes: ContextChanges?) throws {
        if let changes {
            for id in changes.deleted.sorted(by: { $0.description < $1.description }) {
                guard let object = held.objects[id] else { continue }
                do {
                    try object.setValue("touched", forKey: "name")
                    emit("touched-deleted \(object.userID) no-error")
                } catch let error as ManagedObjectError where error.code == .objectDeleted {
                    emit("touched-deleted \(object.userID) objectDeleted isDeleted=\(object.isDeleted)")
                }
            }
        }
        let users = try main.fetchAll(HelperUser.self)
        held.objects = Dictionary(uniqueKeysWithValues: users.map { ($0.objectID, $0) })
        var state: [String: Any] = [
            "count": users.count, "reconnects": manager.coordinator.listenerReconnectCount,
            "registered": main.registeredObjects.count,
        ]
        if users.count <= 200 {
            var byID: [String: Any] = [:]
            for user in users {
                byID[user.userID] = [
                    "name": user.name.map { $0 as Any } ?? NSNull(), "age": user.age.map { $0 as Any } ?? NSNull(),
                ]
            }
            state["users"] = byID
        }
        let data = try JSONSerialization.data(withJSONObject: state, options: [.sortedKeys])
        emit("state " + String(decoding: data, as: UTF8.self))
    }
    let changeToken = main.observeObjectsDidChange { changes in
        do {
            try report(changes)
        } catch {
            emit("error \(error)")
        }
    }
    do {
        try main.performAndWait { try report(nil) }
    } catch {
        fail("\(error)")
    }
    emit("ready \(manager.coordinator.listenerBackendPID.map(String.init) ?? "none")")
    // How it listens, and again whenever that changes (a process that could not reach
    // the relay at once listens alone, then follows the relay at its next try).
    func relayLine() -> String {
        "relay uses=\(manager.coordinator.listenerUsesRelay) hosts=\(manager.coordinator.hostsListenerRelay) "
            + "pid=\(getpid())"
    }
    var reported = relayLine()
    emit(reported)
    while true {
        withExtendedLifetime((recordToken, changeToken)) { _ = usleep(100_000) }
        let now = relayLine()
        if now != reported {
            emit(now)
            reported = now
        }
    }
}

/// The users the watcher holds; used only on the main context's queue.
final class HeldObjects: @unchecked Sendable {
    var objects: [ObjectID: HelperUser] = [:]
}
