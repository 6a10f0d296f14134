import Foundation
import PGDataKit
import Testing

@Suite("One-line queries on entity types")
struct QueryOneLinerTests {
    @Test func fetchFirstCountExists() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for (index, name) in ["Ada", "Bob", "Cy"].enumerated() {
                    let user = User(context: context)
                    user.userID = "u\(index)"
                    user.name = name
                    user.age = 30 + index * 10
                }
                try context.save()
                #expect(try User.fetchAll(in: context).count == 3)
                #expect(try User.fetch(in: context, where: "age >= %d", 40, sortedBy: [FetchSortDescriptor("age", ascending: false)]).map(\.name) == ["Cy", "Bob"])
                #expect(try User.fetch(in: context, limit: 2).count == 2)
                #expect(try User.first(in: context, sortedBy: [FetchSortDescriptor("name", ascending: false)])?.name == "Cy")
                #expect(try User.first(in: context, where: "name == 'Nobody'") == nil)
                #expect(try User.count(in: context) == 3)
                #expect(try User.count(in: context, where: "age < 45") == 2)
                #expect(try User.exists(in: context, where: "name CONTAINS 'y'"))
                #expect(try !User.exists(in: context, where: "age > 100"))
            }
        }
    }

    @Test func distinctValuesAndAggregatesComeFromTheDatabase() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for (index, age) in [30, 30, 41, nil].enumerated() {
                    let user = User(context: context)
                    user.userID = "u\(index)"
                    user.age = age
                }
                try context.save()
                let ages = try User.distinctValues(of: "age", as: Int.self, in: context)
                #expect(ages == [nil, 30, 41])
                #expect(throws: ManagedObjectError.typeMismatch(entity: "User", key: "age", expected: "String", actual: "Int")) {
                    try User.distinctValues(of: "age", as: String.self, in: context)
                }
                let sum: Int? = try User.aggregate(.sum, of: "age", in: context)
                #expect(sum == 101)
                let average: Double? = try User.aggregate(.average, of: "age", in: context)
                #expect(abs((average ?? 0) - 101.0 / 3) < 1e-9)
                let oldest: Int? = try User.aggregate(.max, of: "age", in: context, where: try FetchPredicate(format: "age < 40"))
                #expect(oldest == 30)
                let none: Int? = try User.aggregate(.min, of: "age", in: context, where: try FetchPredicate(format: "age > 99"))
                #expect(none == nil)
                let byID: [String: User] = try User.fetchAsDictionary(keyedBy: "userID", in: context)
                #expect(byID.count == 4)
                #expect(byID["u2"]?.age == 41)
                let byAge = try User.fetchAsDictionary(keyedBy: "age", as: Int.self, in: context)
                #expect(Set(byAge.keys) == [30, 41])  // the user without an age is left out
                #expect(throws: ManagedObjectError.self) { try User.fetchAsDictionary(keyedBy: "age", as: String.self, in: context) }
            }
        }
    }

    @Test func insertOrFetchFindsOrCreates() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let first = try User.insertOrFetch(key: "userID", value: "only", in: context)
                #expect(first.isInserted)
                let again = try User.insertOrFetch(key: "userID", value: "only", in: context)  // unsaved, still found
                #expect(again === first)
                try context.save()
                context.reset()
                let fetched = try User.insertOrFetch(key: "userID", value: "only", in: context)
                #expect(!fetched.isInserted)
                #expect(fetched.userID == "only")
                #expect(throws: ManagedObjectError.self) { try User.insertOrFetch(key: "age", value: "not a number", in: context) }
                #expect(!context.hasChanges)
            }
        }
    }

    @Test func deleteAllIsOneStatementThatReachesTheContexts() throws {
        try ExampleSchema.withManager { manager in
            let seedContext = manager.newPrivateContext()
            try seedContext.performAndWait {
                for index in 0..<20 {
                    let user = User(context: seedContext)
                    user.userID = "u\(index)"
                    user.age = index
                }
                try seedContext.save()
            }
            let main = manager.mainContext
            let watched = try main.performAndWait { try User.fetch(in: main, where: "age < 5") }
            let collected = ChangeCollector()
            let token = main.observeObjectsDidChange { collected.append($0) }
            defer { token.cancel() }
            let context = manager.newPrivateContext()
            let saved = ChangeCollector()
            let saveToken = context.observeDidSave { saved.append($0) }
            defer { saveToken.cancel() }
            try context.performAndWait {
                let local = try User.fetch(in: context, where: "age < 10")
                let before = manager.coordinator.statementCount
                let removed = try User.deleteAll(in: context, where: "age < %d", 10)
                #expect(removed == 10)
                // DELETE, the change record and COMMIT, in the open transaction.
                #expect(manager.coordinator.statementCount - before == 3)
                #expect(local.allSatisfy { $0.isDeleted })
                #expect(try User.count(in: context) == 10)
            }
            #expect(saved.all.first?.deleted.count == 10)
            try main.performAndWait { () throws in
                #expect(watched.allSatisfy { $0.isDeleted })
                #expect(try User.count(in: main) == 10)
            }
            #expect(collected.all.first?.deleted.count == 10)
        }
    }
}
