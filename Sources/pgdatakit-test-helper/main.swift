// A helper program for the integration tests: behaviour that needs a process of its own
// (a crash on purpose, several processes at once) runs here.
import Foundation
import PGDataKit

final class HelperUser: ManagedObject {
    override class var entityName: String { "User" }
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: pgdatakit-test-helper off-queue|off-queue-object DATABASE_URL\n".utf8))
    exit(2)
}
let manager = try ContextManager(configuration: ConnectionConfiguration(arguments[2]), entities: [HelperUser.self])
switch arguments[1] {
case "off-queue":
    // Using a context off its queue must stop a debug build loudly.
    _ = try manager.mainContext.fetchAll(HelperUser.self)
    print("not stopped")
case "off-queue-object":
    let user = manager.mainContext.performAndWait { () -> HelperUser in
        let user = HelperUser(context: manager.mainContext)
        user.userID = "x"
        return user
    }
    user.name = "touched off the queue"
    print("not stopped")
default:
    FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
    exit(2)
}
