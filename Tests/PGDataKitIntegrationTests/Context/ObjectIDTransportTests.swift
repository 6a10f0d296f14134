import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Object IDs travel between processes as URIs or JSON (SQKDataKit's and Core Data's
/// `uriRepresentation` / `managedObjectID(forURIRepresentation:)`).
@Suite("Object IDs as URIs and in messages")
struct ObjectIDTransportTests {
    @Test func anIDSentAsAURIOrJSONFindsItsRowThroughAnotherCoordinator() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let sender = try ExampleSchema.makeManager(configuration)
            defer { sender.close() }
            let receiver = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { receiver.close() }
            let context = sender.newPrivateContext()
            let (id, pending) = try context.performAndWait { () throws -> (ObjectID, ObjectID) in
                let user = User(context: context)
                user.userID = "travels"
                try context.save()
                return (user.objectID, User(context: context).objectID)
            }
            let message = id.uriRepresentation.absoluteString
            #expect(message == "x-pgdatakit://User/\(id.primaryKey ?? 0)")
            let url = try #require(URL(string: message))
            let received = try #require(receiver.coordinator.objectID(forURIRepresentation: url))
            #expect(received == id)
            let data = try JSONEncoder().encode(["user": id])
            let decoded = try JSONDecoder().decode([String: ObjectID].self, from: data)
            #expect(decoded["user"] == id)
            let main = receiver.mainContext
            try main.performAndWait { () throws in
                let user = try #require(try main.existingObject(with: received) as? User)
                #expect(user.userID == "travels")
            }
            // A temporary ID reads back as itself, but names nothing in another context.
            let temporary = try #require(ObjectID(uriRepresentation: pending.uriRepresentation))
            #expect(temporary == pending && temporary.isTemporaryID)
            main.performAndWait {
                #expect(throws: ManagedObjectError.self) { try main.existingObject(with: temporary) }
            }
            // What is not an ID of this model is nil, or a decoding error.
            for text in [
                "x-pgdatakit://Nope/1", "x-pgdatakit://User/", "x-pgdatakit://User/0", "x-pgdatakit://User/abc",
                "x-pgdatakit://User/1/2", "x-coredata://User/p1", "x-pgdatakit://User/temporary/nope", "User/1",
            ] {
                let url = URL(string: text)
                #expect(url.flatMap { receiver.coordinator.objectID(forURIRepresentation: $0) } == nil, "\(text)")
            }
            #expect(throws: DecodingError.self) { try JSONDecoder().decode([ObjectID].self, from: Data(#"["User/1"]"#.utf8)) }
        }
    }
}
