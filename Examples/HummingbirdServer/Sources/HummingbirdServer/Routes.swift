import Hummingbird
import PGDataKit

/// The JSON endpoints. Every request works in a private context of its own — one
/// transaction, on a pooled connection, begun at its first read and ended before the
/// response goes out — so requests never share objects and never see each other's
/// unsaved changes. What leaves the context is a plain value.
struct Routes: Sendable {
    let manager: ContextManager

    /// Runs `body` in a new private context on its queue and ends the context's
    /// transaction afterwards (committed by `save()`, rolled back otherwise), so the
    /// connection goes back to the pool before the response is written.
    func inPrivateContext<T: Sendable>(
        _ name: String, _ body: @escaping @Sendable (ManagedObjectContext) throws -> T
    ) async throws -> T {
        let context = manager.newPrivateContext(name: name)
        return try await context.perform {
            defer { context.rollback() }
            return try body(context)
        }
    }

    func add(to router: Router<BasicRequestContext>) {
        router.get("health") { _, _ in "ok" }
        router.get("users") { _, _ in try await listUsers() }
        router.post("users") { request, requestContext in
            EditedResponse(
                status: .created, response: try await createUser(request.decode(as: UserInput.self, context: requestContext)))
        }
        router.patch("users/:userID") { request, requestContext in
            try await updateUser(
                requestContext.parameters.require("userID"), request.decode(as: UserInput.self, context: requestContext))
        }
        router.get("posts") { _, _ in try await listPosts() }
        router.post("posts") { request, requestContext in
            EditedResponse(
                status: .created, response: try await createPost(request.decode(as: PostInput.self, context: requestContext)))
        }
        router.patch("posts/:postID") { request, requestContext in
            try await updatePost(
                requestContext.parameters.require("postID"), request.decode(as: PostInput.self, context: requestContext))
        }
        router.post("import/users") { request, requestContext in
            try await importUsers(request.decode(as: [JSONValue].self, context: requestContext))
        }
    }

    func listUsers() async throws -> [UserBody] {
        try await inPrivateContext("GET /users") { context in
            try User.fetch(in: context, sortedBy: [FetchSortDescriptor("userID")]).map(UserBody.init)
        }
    }

    func createUser(_ input: UserInput) async throws -> UserBody {
        guard let userID = input.userID, !userID.isEmpty else { throw HTTPError(.badRequest, message: "userID is required") }
        return try await inPrivateContext("POST /users") { context in
            guard try !User.exists(in: context, where: "userID == %@", userID) else {
                throw HTTPError(.conflict, message: "user \(userID) exists")
            }
            let user = User(context: context)
            user.userID = userID
            user.name = input.name
            user.age = input.age
            try context.save()
            return UserBody(user)
        }
    }

    func updateUser(_ userID: String, _ input: UserInput) async throws -> UserBody {
        try await inPrivateContext("PATCH /users") { context in
            guard let user = try User.first(in: context, where: "userID == %@", userID) else {
                throw HTTPError(.notFound, message: "no user \(userID)")
            }
            if let name = input.name { user.name = name }
            if let age = input.age { user.age = age }
            try context.save()
            return UserBody(user)
        }
    }

    func listPosts() async throws -> [PostBody] {
        try await inPrivateContext("GET /posts") { context in
            try Post.fetch(in: context, sortedBy: [FetchSortDescriptor("postID")]).map(PostBody.init)
        }
    }

    func createPost(_ input: PostInput) async throws -> PostBody {
        guard let postID = input.postID, !postID.isEmpty else { throw HTTPError(.badRequest, message: "postID is required") }
        return try await inPrivateContext("POST /posts") { context in
            guard try !Post.exists(in: context, where: "postID == %@", postID) else {
                throw HTTPError(.conflict, message: "post \(postID) exists")
            }
            let post = Post(context: context)
            post.postID = postID
            post.title = input.title
            if let userID = input.userID {
                guard let user = try User.first(in: context, where: "userID == %@", userID) else {
                    throw HTTPError(.unprocessableContent, message: "no user \(userID)")
                }
                post.user = user
            }
            try context.save()
            return PostBody(post)
        }
    }

    func updatePost(_ postID: String, _ input: PostInput) async throws -> PostBody {
        try await inPrivateContext("PATCH /posts") { context in
            guard let post = try Post.first(in: context, where: "postID == %@", postID) else {
                throw HTTPError(.notFound, message: "no post \(postID)")
            }
            if let title = input.title { post.title = title }
            if let userID = input.userID {
                guard let user = try User.first(in: context, where: "userID == %@", userID) else {
                    throw HTTPError(.unprocessableContent, message: "no user \(userID)")
                }
                post.user = user
            }
            try context.save()
            return PostBody(post)
        }
    }

    /// Inserts or updates users by `userID` (one fetch and a few statements per batch of
    /// 1,000), in a private context of the manager; retried by the library on a
    /// serialization failure or deadlock.
    func importUsers(_ records: [JSONValue]) async throws -> ImportBody {
        let summary = try await manager.importRecords(records, mapper: ObjectMapper<User>(uniqueKey: \.userID))
        return ImportBody(
            records: summary.records, inserted: summary.inserted, updated: summary.updated, unchanged: summary.unchanged)
    }
}

/// Answers 503 to work the manager refuses while it shuts down, and 409 to a save that
/// met another process's change of the same row (the default merge policy's error).
struct StoreErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch ShutdownError.Code.shuttingDown {
            throw HTTPError(.serviceUnavailable, message: "shutting down: retry on another instance")
        } catch let error as MergeConflictError {
            throw HTTPError(.conflict, message: error.description)
        }
    }
}
