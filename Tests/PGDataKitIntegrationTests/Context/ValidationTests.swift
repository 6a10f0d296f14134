import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// What a member's hooks saw, for the tests: counts by hook, per context (the suite's
/// tests run in parallel, and another test's save runs the same hooks meanwhile).
let volunteerHookCalls = Mutex<[ObjectIdentifier: [String: Int]]>([:])

/// An error a hook throws that is not a validation error; its text holds a value.
struct VolunteerHookError: Error, CustomDebugStringConvertible {
    let value: String
    var debugDescription: String { "hook refused \(value)" }
}

/// An entity with rules of each kind and the three hooks.
final class Volunteer: ManagedObject {
    override class var tableName: String { "volunteers" }
    @Attribute(unique: true) var memberID: String = ""
    @Attribute(validate: [.required, .length(1...80)]) var name: String?
    @Attribute(validate: [.range(0...150)]) var age: Int?
    @Attribute(validate: [.pattern("[^@ ]+@[^@ ]+")]) var email: String?
    @Attribute(validate: [.custom("an even number") { $0 % 2 == 0 }]) var seats: Int = 2
    @Attribute var starts: Int?
    @Attribute var ends: Int?

    private func count(_ hook: String) {
        guard let context = managedObjectContext else { return }
        volunteerHookCalls.withLock { $0[ObjectIdentifier(context), default: [:]][hook, default: 0] += 1 }
    }

    private func checkDates() throws {
        if let ends, let starts, ends < starts {
            throw ObjectValidationError([ValidationFailure(self, attribute: "ends", reason: "end after it starts")])
        }
        if memberID == "boom" { throw VolunteerHookError(value: "boom-secret") }
    }

    override func validateForInsert() throws {
        count("insert")
        try checkDates()
    }

    override func validateForUpdate() throws {
        count("update")
        try checkDates()
    }

    override func validateForDelete() throws {
        count("delete")
        if memberID.hasPrefix("keep") {
            throw ObjectValidationError([ValidationFailure(self, reason: "stay while it is kept")])
        }
    }
}

/// A crew of sailors; each sailor must have a crew.
final class Crew: ManagedObject {
    override class var tableName: String { "crews" }
    @Attribute(unique: true) var crewID: String = ""
    @Relationship(inverse: "crew", deleteRule: .deny) var sailors: Set<Sailor>
}

final class Sailor: ManagedObject {
    override class var tableName: String { "sailors" }
    @Attribute(unique: true) var sailorID: String = ""
    @Relationship(inverse: "sailors", required: true) var crew: Crew?
}

enum VolunteerSchema {
    static func withManager(_ body: (ContextManager, Connection) throws -> Void) throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(try Model(entities: [Volunteer.self]).schemaSQL())
            var options = ChangeLogOptions()
            options.unannouncedCheckInterval = nil  // no reads by time: the sessions stay still
            let manager = try ContextManager(
                configuration: connection.configuration, entities: [Volunteer.self], changeLog: options)
            defer { manager.close() }
            try body(manager, connection)
        }
    }

    /// A valid member.
    @discardableResult
    static func member(_ id: String, in context: ManagedObjectContext) -> Volunteer {
        let member = Volunteer(context: context)
        member.memberID = id
        member.name = "Name \(id)"
        return member
    }

    /// Every session of the database but `admin`'s and the listener's, as the server
    /// sees it: its last statement and when its state last changed (a statement sent
    /// changes it; a new session adds one).
    static func otherSessions(_ admin: Connection, listener: Int32?) throws -> String {
        try admin.query(
            """
            SELECT coalesce(string_agg(pid::text || ' ' || coalesce(query, '') || ' @ ' || coalesce(state_change::text, ''),
                                       ' | ' ORDER BY pid), '')
            FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid IS DISTINCT FROM $1
            """, [listener.map { Int($0) }]
        )[0].decode(String.self, at: 0)
    }

    static func count(_ admin: Connection) throws -> Int {
        try admin.query("SELECT count(*)::int FROM volunteers")[0].decode(Int.self, at: 0)
    }
}

@Suite("Validation: rules and hooks run before a save sends anything")
struct ValidationTests {
    /// Five invalid objects (each breaking another rule) and a valid one: the save
    /// throws once, naming all five; the server sees no statement; the context keeps
    /// every change, and saves once they are fixed.
    @Test func fiveInvalidObjectsThrowOnceAndNothingIsSent() throws {
        try VolunteerSchema.withManager { manager, admin in
            let context = manager.mainContext
            let members = try context.performAndWait {
                let members = [
                    VolunteerSchema.member("no-name", in: context), VolunteerSchema.member("old", in: context),
                    VolunteerSchema.member("mail", in: context), VolunteerSchema.member("odd", in: context),
                    VolunteerSchema.member("dates", in: context), VolunteerSchema.member("fine", in: context),
                ]
                members[0].name = nil
                members[1].age = 151
                members[2].email = "secret-not-an-email"
                members[3].seats = 3
                (members[4].starts, members[4].ends) = (5, 1)
                // Once, so the pool holds a session and the listener runs: the save below
                // is then the only thing that could send a statement.
                _ = try Volunteer.count(in: context)
                return members
            }
            let listener = manager.coordinator.listener.backendPID
            var before = try VolunteerSchema.otherSessions(admin, listener: listener)
            for _ in 0..<50 {
                Thread.sleep(forTimeInterval: 0.1)
                let again = try VolunteerSchema.otherSessions(admin, listener: listener)
                if again == before { break }
                before = again
            }
            let error = try context.performAndWait { () -> ObjectValidationError? in
                do {
                    try context.save()
                    return nil
                } catch let error as ObjectValidationError {
                    return error
                }
            }
            let failure = try #require(error)
            #expect(try VolunteerSchema.otherSessions(admin, listener: listener) == before, "the save sent a statement")
            #expect(failure.objectIDs == members.prefix(5).map(\.objectID))
            #expect(failure.failures.map(\.rule) == [.required, .range, .pattern, .custom, .custom])
            #expect(failure.failures.map(\.attribute) == ["name", "age", "email", "seats", "ends"])
            #expect(failure.message.hasPrefix("5 objects are not valid: "))
            #expect(!failure.description.contains("secret-not-an-email"))
            #expect(try VolunteerSchema.count(admin) == 0)
            try context.performAndWait {
                #expect(context.insertedObjects.count == 6)
                members[0].name = "Named"
                members[1].age = 150
                members[2].email = "a@b"
                members[3].seats = 4
                members[4].ends = 9
                try context.save()
            }
            #expect(try VolunteerSchema.count(admin) == 6)
        }
    }

    /// Updates run the rules and `validateForUpdate()`, deletes `validateForDelete()`;
    /// objects the save does not write are not checked.
    @Test func updatesAndDeletesRunTheirHooks() throws {
        try VolunteerSchema.withManager { manager, admin in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for id in ["a", "b", "keep-c"] { VolunteerSchema.member(id, in: context) }
                try context.save()
            }
            volunteerHookCalls.withLock { $0[ObjectIdentifier(context)] = [:] }
            try context.performAndWait {
                let all = try Volunteer.fetch(in: context, where: "memberID IN %@", ["a", "b", "keep-c"])
                let byID = Dictionary(uniqueKeysWithValues: all.map { ($0.memberID, $0) })
                byID["a"]?.age = 200
                if let kept = byID["keep-c"] { context.delete(kept) }
                do {
                    try context.save()
                    Issue.record("an invalid update and a refused delete were saved")
                } catch let error as ObjectValidationError {
                    #expect(error.failures.map(\.rule) == [.range, .custom])
                    #expect(error.failures.map(\.attribute) == ["age", nil])
                    #expect(error.failures[1].requirement == "stay while it is kept")
                }
                // "b" was not changed: its hook did not run.
                #expect(volunteerHookCalls.withLock { $0[ObjectIdentifier(context)] } == ["update": 1, "delete": 1])
                context.rollback()
            }
            #expect(try VolunteerSchema.count(admin) == 3)
        }
    }

    /// A hook that throws something other than a validation error: one failure holding
    /// it; the description names its type, not its text.
    @Test func aHookErrorBecomesAFailure() throws {
        try VolunteerSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let member = VolunteerSchema.member("boom", in: context)
                do {
                    try context.save()
                    Issue.record("the hook's error did not stop the save")
                } catch let error as ObjectValidationError {
                    let failure = try #require(error.failures.first)
                    #expect(failure.rule == .validateForInsert && failure.objectID == member.objectID)
                    #expect(failure.underlying is VolunteerHookError)
                    #expect(failure.message.contains("validateForInsert() threw VolunteerHookError"))
                    #expect(!error.description.contains("boom-secret"))
                    #expect(error.debugDescription.contains("boom-secret"))
                }
            }
        }
    }

    /// A child context validates before it pushes: the parent is left as it was.
    @Test func aChildValidatesBeforeItPushes() throws {
        try VolunteerSchema.withManager { manager, _ in
            let parent = manager.newPrivateContext()
            let child = parent.newChildContext()
            try child.performAndWait {
                let member = VolunteerSchema.member("kid", in: child)
                member.age = -1
                #expect(throws: ObjectValidationError.self) { try child.save() }
                member.age = 1
                try child.save()
            }
            parent.performAndWait {
                #expect(parent.insertedObjects.count == 1)
                #expect((parent.insertedObjects.first as? Volunteer)?.age == 1)
            }
        }
    }

    /// An import names the record whose object breaks a rule, and leaves the context as
    /// it was before the call.
    @Test func anImportReportsTheRecord() throws {
        try VolunteerSchema.withManager { manager, admin in
            let context = manager.newPrivateContext()
            let records: [JSONValue] = [
                ["ID": "r0", "Name": "Zero", "Age": 10],
                ["ID": "r1", "Name": "One", "Age": 11],
                ["ID": "r2", "Name": "Two", "Age": 999],
                ["ID": "r3", "Name": "Three", "Age": 13],
            ]
            try context.performAndWait {
                do {
                    _ = try Volunteer.insertOrUpdate(records, uniqueModelKey: \.memberID, uniqueRemoteKey: "ID", in: context) {
                        record, member in
                        member.name = record["Name"]?.stringValue
                        member.age = record["Age"]?.intValue
                    }
                    Issue.record("an import of an age of 999 went through")
                } catch let error as ImportError {
                    #expect(error.code == .invalidRecord)
                    #expect(error.recordIndex == 2 && error.entity == "Volunteer")
                    #expect(error.message == "record 2: Volunteer.age must be between 0 and 150")
                    let validation = try #require(error.underlying as? ObjectValidationError)
                    #expect(validation.failures.map(\.rule) == [.range])
                }
                #expect(context.insertedObjects.isEmpty)
            }
            #expect(try VolunteerSchema.count(admin) == 0)
        }
    }

    /// The article's way of reading a failed save: each failure's message. Only a
    /// validation error is caught (any other fails the test); the row is not written.
    @Test func theArticlesCatchReadsEachFailure() throws {
        try VolunteerSchema.withManager { manager, admin in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                VolunteerSchema.member("old", in: context).age = 200
                do {
                    try context.save()
                } catch let error as ObjectValidationError {
                    for failure in error.failures {
                        print(failure.message)   // Volunteer/temporary-…: Volunteer.age must be between 0 and 150
                    }
                }
                #expect(context.insertedObjects.count == 1)
            }
            #expect(try VolunteerSchema.count(admin) == 0)
        }
    }

    /// A required to-one relationship: checked like attribute rules, before anything is
    /// sent, for new and changed objects; a reference by key alone counts as set.
    @Test func aRequiredRelationshipMustBeSet() throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(try Model(entities: [Crew.self, Sailor.self]).schemaSQL())
            let manager = try ContextManager(configuration: connection.configuration, entities: [Crew.self, Sailor.self])
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let loner = Sailor(context: context)
                loner.sailorID = "loner"
                do {
                    try context.save()
                    Issue.record("a sailor without a crew was saved")
                } catch let error as ObjectValidationError {
                    #expect(error.failures.map(\.rule) == [.required])
                    #expect(error.failures.map(\.attribute) == ["crew"])
                    #expect(error.failures.first?.message.hasSuffix("Sailor.crew must be set") == true)
                }
                let crew = Crew(context: context)
                crew.crewID = "c1"
                loner.crew = crew
                try context.save()
            }
            #expect(try connection.query("SELECT count(*)::int FROM sailors WHERE crew_id IS NOT NULL")[0].decode(Int.self, at: 0) == 1)
            // A fresh context: the sailor's crew is a key, not loaded; a change of another
            // attribute saves; taking the crew away does not.
            let other = manager.newPrivateContext()
            try other.performAndWait {
                let sailor = try #require(try Sailor.fetch(in: other, where: "sailorID == %@", "loner").first)
                sailor.sailorID = "renamed"
                try other.save()
                sailor.crew = nil
                #expect(throws: ObjectValidationError.self) { try other.save() }
            }
        }
    }
}
