import Dispatch
import Foundation
import Logging
import PGDataKit
import ServiceLifecycle

/// `service-sigterm DATABASE_URL PREFIX WRITERS`: a manager's service and a writer service
/// in one `ServiceGroup` that shuts down gracefully on SIGTERM. `WRITERS` tasks save one
/// new user each (`PREFIX-<writer>-<n>`) again and again and print `saved ID` after each
/// save that returned; a save refused because the manager is shutting down prints
/// `refused`, any other failure `failed ERROR`. After SIGTERM the manager's service shuts
/// down first (the writer service is listed before it, so the writers keep going while
/// the manager drains), then the writers; the program prints `stopped closed=BOOL` and
/// exits 0. The test checks that every `saved` user is in the table.
func serviceSigterm(_ arguments: [String]) -> Never {
    guard arguments.count >= 5, let writers = Int(arguments[4]) else {
        fail("usage: service-sigterm DATABASE_URL PREFIX WRITERS")
    }
    let url = arguments[2]
    let prefix = arguments[3]
    let finished = DispatchSemaphore(value: 0)
    Task {
        do {
            let manager = try ContextManager(configuration: ConnectionConfiguration(url), entities: [HelperUser.self])
            let logger = Logger(label: "service-sigterm")
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [
                        .init(service: SavingWriters(manager: manager, prefix: prefix, writers: writers)),
                        .init(service: ContextManagerService(manager, gracePeriod: .seconds(10))),
                    ],
                    gracefulShutdownSignals: [.sigterm], logger: logger))
            emit("ready")
            try await group.run()
            emit("stopped closed=\(manager.coordinator.isClosed)")
        } catch {
            fail("service-sigterm: \(error)")
        }
        finished.signal()
    }
    finished.wait()
    exit(0)
}

/// Saves new users from several tasks until its own graceful shutdown.
struct SavingWriters: Service {
    let manager: ContextManager
    let prefix: String
    let writers: Int

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask { await write(as: writer) }
            }
        }
    }

    /// One writer: a save at a time, each in a private context of its own.
    private func write(as writer: Int) async {
        var index = 0
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let userID = "\(prefix)-\(writer)-\(index)"
            index += 1
            let context = manager.newPrivateContext(name: "writer \(writer)")
            do {
                try await context.perform {
                    let user = HelperUser(context: context)
                    user.userID = userID
                    try context.save()
                }
                emit("saved \(userID)")
            } catch ShutdownError.Code.shuttingDown {
                emit("refused")
                try? await Task.sleep(for: .milliseconds(20))
            } catch {
                emit("failed \(error)")
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}
