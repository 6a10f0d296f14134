import ArgumentParser
import Foundation
import PGDataKit

#if canImport(Glibc)
    import Glibc
#endif

extension ControllerBenchmark {
    /// Copies `rows` users (ages 0–99) into the table.
    func load(_ database: BenchDatabase) throws {
        let loader = try Connection(database.configuration)
        try loader.copy(
            into: "users", columns: ["user_id", "name", "age"],
            rows: (0..<rows).map { index in ["user-\(index)", "Name \(index)", index % 100] })
        loader.close()
    }

    /// Opens the controllers, each of one age band, together holding every row.
    func openControllers(
        on main: ManagedObjectContext, timing: BatchTiming
    ) throws -> [ManagedObjectController<BenchUser>] {
        var open: [ManagedObjectController<BenchUser>] = []
        let band = max(1, 100 / controllers)
        for index in 0..<controllers {
            let low = index * band
            let high = index == controllers - 1 ? 100 : low + band
            let request = FetchRequest<BenchUser>(
                predicate: try FetchPredicate(format: "age >= %d AND age < %d", low, high),
                sortDescriptors: [FetchSortDescriptor("age"), FetchSortDescriptor("userID")])
            let controller = ManagedObjectController(fetchRequest: request, context: main)
            controller.onChange = { _, changes in
                guard changes.kind == .changed else { return }
                timing.controllerChanged(index, at: monotonicNanoseconds())
            }
            try main.performAndWait { try controller.performFetch() }
            open.append(controller)
        }
        return open
    }

    /// Saves batch `number` in the writer and waits until this process merged it and
    /// every controller has been told; returns the times and statements.
    func runBatch(
        _ number: Int, writer: BenchProcess, timing: BatchTiming, main: ManagedObjectContext,
        coordinator: StoreCoordinator
    ) throws -> (sent: Int64, measured: BatchTiming.Measured) {
        timing.begin(statements: coordinator.statementCount)
        writer.send("batch \(number)")
        let sent = try writer.time(of: "sent", number)
        let deadline = ContinuousClock.now + .seconds(30)
        while timing.mergeCount <= number {
            guard ContinuousClock.now < deadline else {
                throw ValidationError("batch \(number) was not merged within 30 seconds")
            }
            usleep(50)
        }
        main.performAndWait {}  // the merge's block, controllers included, has finished
        return (sent, timing.end(statements: coordinator.statementCount))
    }
}
