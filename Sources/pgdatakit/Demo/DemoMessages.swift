import Foundation

/// What a demo worker tells the parent, one JSON object per line on its standard output.
struct WorkerReport: Codable, Sendable {
    enum Kind: String, Codable, Sendable {
        /// Connected and about to start (carries the process id).
        case ready
        /// Counters so far, a few times a second.
        case status
        /// Stopped writing after the parent's `stop`.
        case stopped
        /// The proof: checksums of the main context and of a fresh fetch.
        case final
        /// Something failed; `message` says what.
        case failed
    }

    var kind: Kind
    var worker: Int
    var pid: Int32 = 0
    var state = ""
    var counters = WorkerCounters()
    var mainChecksum: String?
    var freshChecksum: String?
    var mainCount: Int?
    /// When the main context's listing differs from the fresh fetch's: the first lines
    /// each has that the other lacks (`main: …`, `fresh: …`), to say which objects.
    var listingDifferences: [String]?
    var message: String?
}

/// What a worker did so far.
struct WorkerCounters: Codable, Sendable, Equatable {
    /// Successful saves.
    var saves = 0
    /// Records imported (users and posts, new or updated).
    var imported = 0
    /// Objects renamed under the worker's merge policy.
    var edits = 0
    /// Ages incremented by one (under `.error`, retried on conflict): the lost-update proof.
    var increments = 0
    /// Increments whose save ended with `SaveOutcomeUnknownError`: each may or may not
    /// be stored (counted, never redone).
    var incrementsUnknown = 0
    /// Saves other than increments whose outcome was unknown (`SaveOutcomeUnknownError`)
    /// under `demo --chaos`: counted and not redone.
    var savesUnknown = 0
    /// Steps done again under `demo --chaos` after failing outside a commit (a
    /// terminated backend, a restarting server refusing connections).
    var chaosRetries = 0
    /// Posts deleted.
    var deletes = 0
    /// Conflicts settled by the worker's merge policy (`resolvedConflicts`).
    var conflictsSettled = 0
    /// Conflicts that failed a save under `.error` and were retried.
    var conflictsRetried = 0
    /// Change records of other processes this worker's main context merged.
    var merged = 0
    /// Other processes (by process id) whose saves reached this worker.
    var mergedFrom: Set<Int32> = []
    /// Saves of this worker that waited for a lock past the lock timeout (the library's
    /// `pgdatakit_transient_failures_total{cause="lock_timeout"}`).
    var lockTimeouts = 0
    /// Deadlocks this worker's saves met (`…{cause="deadlock"}`): 0 while every save
    /// takes its locks in one order.
    var deadlocks = 0
    /// Saves the library redid itself (`pgdatakit_retries_total`), on top of the
    /// worker's own retries in `conflictsRetried`.
    var libraryRetries = 0
    /// `libraryRetries` by the retry's `cause` (`serialization`, `row_held`, `conflict`,
    /// …): why the library redid them.
    var libraryRetriesByCause: [String: Int] = [:]
}

/// What the parent tells a worker, one line on its standard input.
enum WorkerCommand {
    /// Stop writing, report `stopped`.
    static let stop = "stop"
    /// `verify <userID>`: wait until the marker the parent saved is merged, then report
    /// `final`.
    static let verify = "verify"
}

extension WorkerReport {
    /// The report as one line of JSON.
    func line() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// A report read back from a line, or nil for any other line.
    init?(line: String) {
        guard line.hasPrefix("{"), let report = try? JSONDecoder().decode(WorkerReport.self, from: Data(line.utf8))
        else { return nil }
        self = report
    }
}
