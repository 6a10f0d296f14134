import Foundation
import Testing

@testable import PGDataKit

/// Whether a predicate selects the same objects in SQL, in memory, and with unsaved
/// objects: for suites whose rows are inserted twice, as saved (`s:` codes) and as
/// unsaved copies (`m:` codes).
enum PredicateAgreement {
    /// Checks that `predicate` selects the objects `expected` (codes without prefix) in
    /// SQL over saved rows, in memory over the same objects, and in one fetch over saved
    /// rows and unsaved copies that `insert(prefix:into:)` adds (rolled back afterwards).
    static func check<Object: ManagedObject>(
        _ predicate: FetchPredicate, _ expected: [String], of type: Object.Type, code: KeyPath<Object, String>,
        in manager: ContextManager, insert: (String, ManagedObjectContext) -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let evaluator = PredicateEvaluator(model: manager.coordinator.model)
        let context = manager.newPrivateContext()
        try context.performAndWait { () throws in
            var request = FetchRequest<Object>(predicate: predicate)
            request.includesPendingChanges = false
            let sql = try context.fetch(request).map { $0[keyPath: code] }.sorted()
            #expect(sql == expected.map { "s:" + $0 }, "SQL: \(predicate)", sourceLocation: sourceLocation)
            let memory = try context.fetchAll(Object.self).filter { try evaluator.evaluate(predicate, on: $0) }
                .map { $0[keyPath: code] }
            #expect(memory.sorted() == sql, "memory: \(predicate)", sourceLocation: sourceLocation)
            insert("m:", context)
            let both = try context.fetch(FetchRequest<Object>(predicate: predicate)).map { $0[keyPath: code] }.sorted()
            #expect(both == (sql + expected.map { "m:" + $0 }).sorted(), "with pending: \(predicate)", sourceLocation: sourceLocation)
            context.rollback()
        }
    }
}
