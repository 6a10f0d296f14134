import Foundation

extension ManagedObject {
    /// Calls `handler` on the context's queue each time a save or a merge changes this
    /// object (RHManagedObject's did-update block): after this context saves it, after a
    /// private context's save is merged, and after another process's save arrives
    /// through the change log. It receives the names of the attributes and relationships
    /// that changed. When the object is deleted (here or elsewhere) it is called once
    /// more with no keys — `isDeleted` is then `true` — and not again.
    ///
    /// For example:
    ///
    /// ```swift
    /// let token = try main.performAndWait { () throws -> ObserverToken? in
    ///     guard let ada = try User.first(in: main, where: "userID == %@", "u1") else { return nil }
    ///     return ada.observeChanges { changedKeys in
    ///         if ada.isDeleted { print("Ada is gone") } else { print("Ada changed:", changedKeys.sorted()) }
    ///     }
    /// }
    /// // keep `token`; `token?.cancel()` (or releasing it) ends the observation
    /// ```
    ///
    /// Call it on the context's queue. Unsaved changes do not call it. An object of no
    /// context gets a token that observes nothing.
    public func observeChanges(_ handler: @escaping (Set<String>) -> Void) -> ObserverToken {
        checkQueue()
        guard let context = managedObjectContext else { return ObserverToken {} }
        return ControllerHub.hub(for: context).observe(self, handler)
    }
}
