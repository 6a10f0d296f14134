import Foundation
import PGDataKit

/// The README's user (migrations/0001).
final class User: ManagedObject {
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
    @Relationship(inverse: "user", deleteRule: .cascade) var posts: Set<Post>
}

/// The README's post (migrations/0001).
final class Post: ManagedObject {
    override class var tableName: String { "posts" }
    @Attribute(unique: true) var postID: String = ""
    @Attribute var title: String?
    @Relationship(inverse: "posts") var user: User?
}

/// One attribute of every type, optional and not.
final class Sample: ManagedObject {
    override class var tableName: String { "samples" }
    @Attribute var text: String = ""
    @Attribute var optionalText: String?
    @Attribute var int: Int = 0
    @Attribute var int64: Int64 = 0
    @Attribute var int32: Int32 = 0
    @Attribute var int16: Int16 = 0
    @Attribute var double: Double = 0
    @Attribute var float: Float = 0
    @Attribute var decimal: Decimal = 0
    @Attribute var flag: Bool = false
    @Attribute var date: Date = Date(timeIntervalSince1970: 0)
    @Attribute var uuid: UUID = UUID()
    @Attribute var data: Data = Data()
    @Attribute var json: JSONValue = .null
    @Attribute var optionalInt: Int?
    @Attribute var optionalDouble: Double?
    @Attribute var optionalDecimal: Decimal?
    @Attribute var optionalFlag: Bool?
    @Attribute var optionalDate: Date?
    @Attribute var optionalUUID: UUID?
    @Attribute var optionalData: Data?
    @Attribute var optionalJSON: JSONValue?
}

/// A team whose members are nullified when it goes.
final class Team: ManagedObject {
    override class var tableName: String { "teams" }
    @Attribute var name: String = ""
    @Relationship(inverse: "team", deleteRule: .nullify) var members: Set<Member>
}

/// A member of a team.
final class Member: ManagedObject {
    override class var tableName: String { "members" }
    @Attribute var name: String = ""
    @Relationship(inverse: "members") var team: Team?
}

/// A vault that cannot be deleted while it holds items.
final class Vault: ManagedObject {
    override class var tableName: String { "vaults" }
    @Attribute var name: String = ""
    @Relationship(inverse: "vault", deleteRule: .deny) var items: Set<Item>
}

/// An item in a vault.
final class Item: ManagedObject {
    override class var tableName: String { "items" }
    @Attribute var name: String = ""
    @Relationship(inverse: "items") var vault: Vault?
}

enum ExampleSchema {
    /// The test tables beside the example schema (migration 0001): generated from their
    /// entities, as a program's own would be.
    static var extraTables: String {
        get throws { try Model(entities: [Sample.self, Team.self, Member.self, Vault.self, Item.self]).schemaSQL() }
    }

    static let entities: [ManagedObject.Type] = [User.self, Post.self, Sample.self, Team.self, Member.self, Vault.self, Item.self]

    /// Runs `body` with a context manager over a fresh database holding the example
    /// schema and the test tables.
    static func withManager<T>(_ body: (ContextManager) throws -> T) throws -> T {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try makeManager(configuration)
            defer { manager.close() }
            return try body(manager)
        }
    }

    /// Adds the test tables to a migrated database and opens a manager on it.
    static func makeManager(_ configuration: ConnectionConfiguration) throws -> ContextManager {
        let connection = try Connection(configuration)
        defer { connection.close() }
        try connection.executeScript(try extraTables)
        return try ContextManager(configuration: configuration, entities: entities)
    }

    /// Inserts `count` new users, `userID` `<prefix><index>`, into `context` (call on its
    /// queue); nothing is saved.
    @discardableResult
    static func insertUsers(_ count: Int, prefix: String = "u", in context: ManagedObjectContext) -> [User] {
        (0..<count).map { index in
            let user = User(context: context)
            user.userID = prefix + String(index)
            return user
        }
    }

    /// Saves `count` new users (`userID` `u0`, `u1`, …) and returns a fresh private
    /// context with them fetched (their committed values share the fetch's blocks).
    static func fetchedUsers(_ count: Int, in manager: ContextManager) throws -> (ManagedObjectContext, [User]) {
        let seeding = manager.newPrivateContext()
        try seeding.performAndWait {
            insertUsers(count, in: seeding)
            try seeding.save()
        }
        let context = manager.newPrivateContext()
        return (context, try context.performAndWait { try User.fetchAll(in: context) })
    }

    /// A plain connection to the manager's database, for checking what is stored.
    static func count(_ sql: String, _ parameters: [(any PostgresEncodable)?] = [], in manager: ContextManager) throws -> Int {
        try manager.coordinator.pool.withConnection { connection in
            try connection.query(sql, parameters)[0].decode(Int.self, at: 0)
        }
    }
}

extension ExampleSchema {
    /// `withManager` for async tests.
    static func withManagerAsync(_ body: @Sendable (ContextManager) async throws -> Void) async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let manager = try makeManager(configuration)
        defer { manager.close() }
        try await body(manager)
    }
}
