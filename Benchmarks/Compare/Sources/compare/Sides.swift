import FluentKit
import Foundation
import PGDataKit
import PostgresKit

/// The benchmark's entity for PGDataKit: the `users` table of the repository's migrations.
final class User: ManagedObject {
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
}

/// The same row for Fluent, in `users_fluent` (made like `users`).
final class FluentUser: FluentKit.Model, @unchecked Sendable {
    // Sendable as Fluent's documentation makes models: used by one task at a time.
    static let schema = "users_fluent"
    @ID(custom: "id", generatedBy: .database) var id: Int64?
    @Field(key: "user_id") var userID: String
    @OptionalField(key: "name") var name: String?
    @OptionalField(key: "age") var age: Int?
    @Field(key: "version") var version: Int64

    init() {}

    init(userID: String) {
        self.userID = userID
        version = 1
    }
}

/// PGDataKit's batch: insertOrUpdate (one IN fetch, the objects' changes), a save (one
/// transaction: locks, statements, change record, NOTIFY), a reset.
func pgDataKitBatch(_ chunk: ArraySlice<JSONValue>, in context: ManagedObjectContext) throws {
    try context.performAndWait {
        try User.insertOrUpdate(Array(chunk), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, batchSize: chunk.count) {
            record, user in
            user.name = record["Name"]?.stringValue
            user.age = record["Age"]?.intValue
        }
        try context.save()
        context.reset()
    }
}

/// SQLKit's upsert of one batch: one `INSERT … VALUES (…), (…) ON CONFLICT (user_id) DO
/// UPDATE`, values bound, into `users_sqlkit` (made like `users`).
func sqlKitBatch(_ chunk: ArraySlice<JSONValue>, on sql: some SQLDatabase) async throws {
    var insert = sql.insert(into: "users_sqlkit").columns("user_id", "name", "age")
    for record in chunk {
        insert = insert.values(
            [record["UserID"]?.stringValue ?? "", record["Name"]?.stringValue, record["Age"]?.intValue] as [any Encodable & Sendable])
    }
    try await insert.onConflict(with: ["user_id"]) {
        $0.set(excludedValueOf: "name").set(excludedValueOf: "age").set("version", to: SQLRaw("users_sqlkit.version + 1"))
    }.run()
}

/// Fluent's model API as its users write an import: in one transaction, the batch's
/// existing rows with one `IN` query, then each changed model updated (one `UPDATE`
/// each, its version bumped) and the new ones created with one `INSERT`.
func fluentBatch(_ chunk: ArraySlice<JSONValue>, on database: any Database) async throws {
    let ids = chunk.map { $0["UserID"]?.stringValue ?? "" }
    try await database.transaction { transaction in
        var byID: [String: FluentUser] = [:]
        for user in try await FluentUser.query(on: transaction).filter(\.$userID ~~ ids).all() { byID[user.userID] = user }
        var created: [FluentUser] = []
        for record in chunk {
            let id = record["UserID"]?.stringValue ?? ""
            let existing = byID[id]
            let user = existing ?? FluentUser(userID: id)
            user.name = record["Name"]?.stringValue
            user.age = record["Age"]?.intValue
            if existing == nil {
                created.append(user)
            } else if user.hasChanges {
                user.version += 1
                try await user.update(on: transaction)
            }
        }
        if !created.isEmpty { try await created.create(on: transaction) }
    }
}
