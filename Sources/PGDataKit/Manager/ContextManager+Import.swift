import Foundation

/// Imports in private contexts of the manager, whose saves are merged into the main
/// context like any other private context's.
extension ContextManager {
    /// An `ImportOperation` with a new private context of this manager, for an
    /// `OperationQueue`.
    ///
    /// For example:
    ///
    /// ```swift
    /// let operation = manager.importOperation(records, mapper: User.objectMapper)
    /// queue.addOperations([operation], waitUntilFinished: true)
    /// if let error = operation.error { print(error) }
    /// ```
    public func importOperation<Object: ManagedObject, Records: Sequence & Sendable>(
        _ records: Records, mapper: ObjectMapper<Object>, options: ImportOptions = ImportOptions()
    ) -> ImportOperation<Object> where Records.Element == JSONValue {
        ImportOperation(records, mapper: mapper, options: options, context: newPrivateContext(name: "import"))
    }

    /// Imports records in a new private context of this manager; see
    /// `ManagedObjectContext.importRecords(_:mapper:options:progress:)`.
    ///
    /// For example:
    ///
    /// ```swift
    /// let summary = try await manager.importRecords(records, mapper: User.objectMapper, options: ImportOptions(batchSize: 5_000))
    /// ```
    ///
    /// - Throws: `CancellationError`, `ImportError`, `PostgresError`.
    @discardableResult
    public func importRecords<Object: ManagedObject, Records: Sequence & Sendable>(
        _ records: Records, mapper: ObjectMapper<Object>, options: ImportOptions = ImportOptions(),
        progress: Progress? = nil
    ) async throws -> ImportSummary where Records.Element == JSONValue {
        try await newPrivateContext(name: "import").importRecords(records, mapper: mapper, options: options, progress: progress)
    }
}
