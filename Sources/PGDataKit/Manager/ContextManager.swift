import Logging

/// The entry point (SQKDataKit's context manager): one coordinator, one long-lived main
/// context, and private contexts for units of work, whose saves are merged into the main
/// context right after they commit.
///
/// For example:
///
/// ```swift
/// let manager = try ContextManager(
///     configuration: ConnectionConfiguration(databaseURL), entities: [User.self, Post.self])
///
/// let context = manager.newPrivateContext()
/// try context.performAndWait {
///     let user = User(context: context)
///     user.userID = "u1"
///     try context.save()
/// }
///
/// let names = try manager.mainContext.performAndWait {
///     try manager.mainContext.fetchAll(User.self).map(\.userID)
/// }
/// ```
///
/// From async code use `try await context.perform { … }`; from plain threads use
/// `performAndWait`. The main context has a serial queue of its own (a server has no UI
/// thread): every use of it goes through these two.
public final class ContextManager: Sendable {
    /// The coordinator all contexts share.
    public let coordinator: StoreCoordinator
    /// The long-lived context where private contexts' saves are merged.
    public let mainContext: ManagedObjectContext
    let logger = Logger(label: "pgdatakit.manager")

    /// Creates a manager over a coordinator.
    public init(coordinator: StoreCoordinator) {
        self.coordinator = coordinator
        self.mainContext = ManagedObjectContext(concurrencyType: .main, coordinator: coordinator, name: "main")
        mainContext.performAndWait { mainContext.manager = self }
    }

    /// Builds the model, opens the pool and checks the schema.
    ///
    /// - Throws: `ModelError`, `SchemaMismatchError` or `PostgresError`.
    public convenience init(
        configuration: ConnectionConfiguration, entities: [ManagedObject.Type], maximumConnections: Int = 10
    ) throws {
        let model = try Model(entities: entities)
        self.init(
            coordinator: try StoreCoordinator(
                model: model, configuration: configuration, maximumConnections: maximumConnections))
    }

    /// A new private context: a transaction of its own, begun on first use.
    public func newPrivateContext(name: String? = nil) -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .private, coordinator: coordinator, name: name)
        context.performAndWait { context.manager = self }
        return context
    }

    /// Queues the merge of a private context's save into the main context.
    func mergeIntoMainContext(_ changes: ContextChanges) {
        let main = mainContext
        let logger = self.logger
        main.perform {
            do {
                try main.mergeChanges(changes)
            } catch {
                logger.error("merging a save into the main context failed: \(error)")
            }
        }
    }
}
