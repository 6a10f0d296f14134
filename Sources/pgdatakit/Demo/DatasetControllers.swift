import Foundation
import PGDataKit

/// All users and all posts of a main context, in key order, kept current by object
/// controllers — fed only by merges. Every process of the demo holds one.
final class DatasetControllers {
    private let context: ManagedObjectContext
    private let users: ManagedObjectController<User>
    private let posts: ManagedObjectController<Post>

    init(context: ManagedObjectContext) throws {
        self.context = context
        (users, posts) = try context.performAndWait {
            let users = ManagedObjectController(
                fetchRequest: FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")]), context: context)
            let posts = ManagedObjectController(
                fetchRequest: FetchRequest<Post>(sortDescriptors: [FetchSortDescriptor("postID")]), context: context)
            try users.performFetch()
            try posts.performFetch()
            return (users, posts)
        }
    }

    func stop() {
        users.stop()
        posts.stop()
    }

    var counts: (users: Int, posts: Int) {
        context.performAndWait { (users.objects.count, posts.objects.count) }
    }

    /// Waits until the user with `userID` is among the controller's objects (merged);
    /// false when `seconds` passed first.
    func waitForUser(_ userID: String, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !context.performAndWait({ users.objects.contains { $0.userID == userID } }) {
            guard Date() < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    /// The listing the checksums cover (see `DemoWorker.listing`).
    func listing() throws -> String {
        try context.performAndWait { try DemoWorker.listing(users: users.objects, posts: posts.objects) }
    }
}
