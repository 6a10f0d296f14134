import Foundation
import PGDataKit
import Testing

/// A subclass of the README's kind: renames every user.
final class ShoutNames: DataOperation, @unchecked Sendable {
    override func perform(in context: ManagedObjectContext) throws {
        for user in try User.fetchAll(in: context) { user.name = user.name?.uppercased() }
        completeAndSave()
    }
}

@Suite("DataOperation: private context, completeAndSave, errors")
struct DataOperationTests {
    @Test func aClosureOperationSavesInItsPrivateContext() throws {
        try ImportSchema.withManager { manager throws in
            let operation = DataOperation(manager: manager) { operation, context in
                #expect(context.concurrencyType == .private)
                #expect(context.isOnQueue)
                let user = try User.insertOrFetch(key: "userID", value: "u1", in: context)
                user.name = "Ada"
                operation.completeAndSave()
            }
            OperationQueue().addOperations([operation], waitUntilFinished: true)
            #expect(operation.isFinished)
            #expect(operation.didSave)
            #expect(operation.errors.isEmpty)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'Ada'", in: manager) == 1)

            let shout = ShoutNames(manager: manager)
            shout.start()
            #expect(shout.didSave)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'ADA'", in: manager) == 1)
        }
    }

    @Test func errorsAreCollectedAndTheOperationFinishesEvenWhenTheSaveFails() throws {
        try ImportSchema.withManager { manager throws in
            // The work throws after changing something: nothing is saved.
            struct Refused: Error {}
            let throwing = DataOperation(manager: manager) { operation, context in
                User(context: context).userID = "never"
                operation.addError(Refused())
                throw Refused()
            }
            // The save fails (a duplicate key): the error is collected.
            let failing = DataOperation(manager: manager) { operation, context in
                User(context: context).userID = "dup"
                User(context: context).userID = "dup"
                operation.completeAndSave()
            }
            // The work forgets to complete: rolled back.
            let forgetful = DataOperation(manager: manager) { _, context in
                User(context: context).userID = "forgotten"
            }
            OperationQueue().addOperations([throwing, failing, forgetful], waitUntilFinished: true)
            #expect(throwing.isFinished && failing.isFinished && forgetful.isFinished)
            #expect(throwing.errors.count == 2 && throwing.errors.allSatisfy { $0 is Refused })
            #expect(!failing.didSave)
            #expect(failing.errors.count == 1)
            #expect((failing.errors.first as? PostgresError)?.sqlState == .uniqueViolation)
            #expect(forgetful.errors.isEmpty && !forgetful.didSave)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 0)
        }
    }
}
