import Foundation
import Hummingbird
import Logging
import PGDataKit
import ServiceLifecycle

/// `HummingbirdServer [PORT]` with `DATABASE_URL` set: the JSON API of `Routes`, the
/// change stream of `ChangeEvents`, and the context manager, run as one `ServiceGroup`
/// that shuts down gracefully on SIGTERM or SIGINT. The port comes from the first
/// argument, else `PORT`, else 8080.
@main
struct Server {
    static func main() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let databaseURL = environment["DATABASE_URL"], !databaseURL.isEmpty else {
            FileHandle.standardError.write(Data("HummingbirdServer: set DATABASE_URL (postgres://user@host:port/database)\n".utf8))
            exit(2)
        }
        let portText = CommandLine.arguments.dropFirst().first ?? environment["PORT"] ?? "8080"
        guard let port = Int(portText) else {
            FileHandle.standardError.write(Data("HummingbirdServer: not a port: \(portText)\n".utf8))
            exit(2)
        }
        let logger = Logger(label: "HummingbirdServer")  // (level info by default)

        // The manager: a pool, a main context, and a listener merging other processes'
        // saves. createsSchema creates the tables on an empty database (for the example;
        // production schemas come from reviewed migrations, `pgdatakit migrate`).
        let manager = try ContextManager(
            configuration: ConnectionConfiguration(databaseURL), entities: [User.self, Post.self],
            createsSchema: true, logger: logger)

        let router = Router()
        router.add(middleware: StoreErrorMiddleware())
        Routes(manager: manager).add(to: router)
        ChangeEvents(manager: manager).add(to: router)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { _ in logger.info("listening on 127.0.0.1:\(port)") }, logger: logger)

        // The manager's service first: a group shuts its services down in reverse order,
        // so the server stops taking requests and finishes those it has before the
        // manager refuses new work, lets saves in flight finish and closes the pool.
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: ContextManagerService(manager, gracePeriod: .seconds(10))),
                    .init(service: app),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        logger.info("stopped")
    }
}
