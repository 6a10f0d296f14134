import Foundation
import PGDataKit

/// The passes of `UpsertBenchmark` over one database: the object path's batches and the
/// floor's, with this thread's CPU time by pass.
struct UpsertPasses {
    let manager: ContextManager
    let raw: Connection
    /// Records per batch.
    let size: Int
    /// This thread's CPU seconds by pass (the context runs on the calling thread).
    var cpu: [String: Double] = [:]

    /// The batches of a generation of records.
    func chunks(_ input: [JSONValue]) -> [ArraySlice<JSONValue>] {
        stride(from: 0, to: input.count, by: size).map { input[$0..<min(input.count, $0 + size)] }
    }

    /// One batch of insertOrUpdate, saved, the context reset: seconds.
    mutating func objectBatch(_ chunk: ArraySlice<JSONValue>, in context: ManagedObjectContext, _ name: String) throws -> Double {
        let cpuStart = threadCPUSeconds()
        defer { cpu[name, default: 0] += threadCPUSeconds() - cpuStart }
        let size = size
        return try context.performAndWait {
            try measure {
                try BenchUser.insertOrUpdate(
                    Array(chunk), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, batchSize: size
                ) { record, user in
                    user.name = record["Name"]?.stringValue
                    user.age = record["Age"]?.intValue
                }
                try context.save()
                context.reset()
            }
        }
    }

    /// One batch edited as a worker edits objects it fetched (no import): the batch's
    /// objects fetched with one predicate (`userID IN %@`), given the records' values,
    /// saved, the context reset: seconds.
    mutating func editBatch(_ chunk: ArraySlice<JSONValue>, in context: ManagedObjectContext, _ name: String) throws -> Double {
        let records = Dictionary(chunk.map { ($0["UserID"]?.stringValue ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        let ids = Array(records.keys)
        let cpuStart = threadCPUSeconds()
        defer { cpu[name, default: 0] += threadCPUSeconds() - cpuStart }
        return try context.performAndWait {
            try measure {
                for user in try BenchUser.fetch(in: context, where: "userID IN %@", ids) {
                    let record = records[user.userID]
                    user.name = record?["Name"]?.stringValue
                    user.age = record?["Age"]?.intValue
                }
                try context.save()
                context.reset()
            }
        }
    }

    /// One batch of the floor: the same rows as one raw upsert statement, into a table
    /// of its own (`users_floor`, made like `users`): seconds. Its arrays travel in
    /// binary, as the object path's do (`BinaryArrayBuilder`; `[Int?]` goes binary by
    /// itself, a public `[String]` as text).
    mutating func floorBatch(_ chunk: ArraySlice<JSONValue>, _ name: String) throws -> Double {
        let ids = chunk.map { $0["UserID"]?.stringValue ?? "" }
        let names = chunk.map { $0["Name"]?.stringValue }
        let ages = chunk.map { $0["Age"]?.intValue }
        let cpuStart = threadCPUSeconds()
        defer { cpu[name, default: 0] += threadCPUSeconds() - cpuStart }
        return try measure {
            // (Written in the timed part, as the text literals were written by `execute`.)
            var idArray = BinaryArrayBuilder(element: .text, capacity: ids.count)
            for id in ids { try idArray.append(id) }
            var nameArray = BinaryArrayBuilder(element: .text, capacity: names.count)
            for name in names {
                if let name { try nameArray.append(name) } else { nameArray.appendNull() }
            }
            try raw.execute(
                """
                INSERT INTO users_floor (user_id, name, age) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
                ON CONFLICT (user_id) DO UPDATE SET name = EXCLUDED.name, age = EXCLUDED.age, version = users_floor.version + 1
                """, [BinaryArray<String>(bytes: idArray.finish()), BinaryArray<String>(bytes: nameArray.finish()), ages])
        }
    }

    /// One pass: the object path's batches and, when named, the floor's batches of the
    /// same records, alternating batch by batch (which goes first alternates too), so
    /// both meet the same moments of a shared machine. Seconds of each and statements.
    ///
    /// With `editing`, the object path edits fetched objects (`editBatch`) instead of
    /// importing.
    mutating func pass(
        _ input: [JSONValue], object: String, floor: String?, editing: Bool = false
    ) throws -> (floor: Double, object: Double, statements: Int) {
        let context = manager.newPrivateContext(name: "bench")
        var floorSeconds = 0.0
        var objectSeconds = 0.0
        var objectStatements = 0
        for (index, chunk) in chunks(input).enumerated() {
            if let floor, index % 2 == 1 { floorSeconds += try floorBatch(chunk, floor) }
            let statementsBefore = manager.coordinator.statementCount
            objectSeconds += try editing ? editBatch(chunk, in: context, object) : objectBatch(chunk, in: context, object)
            objectStatements += manager.coordinator.statementCount - statementsBefore
            if let floor, index % 2 == 0 { floorSeconds += try floorBatch(chunk, floor) }
        }
        return (floorSeconds, objectSeconds, objectStatements)
    }
}
