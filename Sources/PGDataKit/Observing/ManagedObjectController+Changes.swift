import Foundation

extension ManagedObjectController: ControllerClient {
    var membershipEntity: EntityDescription? { givenObjects == nil ? entityForMembership : nil }

    /// The database must decide when rows were inserted, when an updated row's changed
    /// keys touch the predicate (or, for a windowed controller, the sort keys), when the
    /// changed keys are unknown, or when a member is no longer registered in the context
    /// (so no merge refreshed it).
    func needsMembership(for batch: EntityChangeBatch, changes: ContextChanges) -> Bool {
        guard isFetched, !shared.isStopped, fetchRequest != nil else { return false }
        if mayNeedMembership(for: batch, changes: changes) { return true }
        return batch.updated.contains { members.member($0) != nil && context.registeredObject(for: $0) == nil }
    }

    /// The part of `needsMembership` that reads only immutable state, so any thread may
    /// ask: inserted rows, unknown changed keys, or changed keys the predicate (or a
    /// window's order) reads.
    func mayNeedMembership(for batch: EntityChangeBatch, changes: ContextChanges) -> Bool {
        guard fetchRequest != nil, !shared.isStopped else { return false }
        if !batch.inserted.isEmpty { return true }
        return batch.updated.contains { id in
            guard let keys = changes.changedKeys[id], !keys.isEmpty else { return true }
            return !keys.isDisjoint(with: predicateKeys) || !keys.isDisjoint(with: windowKeys)
        }
    }

    func membershipCondition(compiler: inout PredicateSQLCompiler) throws -> MembershipNeed {
        guard let request = fetchRequest, let entity = entityForMembership, !shared.isStopped else { return .none }
        guard let predicate = request.predicate else { return .condition(nil) }
        return .condition(try compiler.compile(predicate, entity: entity, alias: "t"))
    }

    func coordinatorDidClose() { stop() }

    func process(_ changes: ContextChanges, batch: EntityChangeBatch?, answer: MembershipAnswerForClient) {
        guard isFetched, !shared.isStopped else { return }
        refileTemporaryIDs()
        let oldSections = sectionList
        let oldCount = members.count
        let diff: (MembershipDiff, [ObjectID])
        if givenObjects != nil {
            diff = processGivenObjects(changes)
        } else {
            guard let batch else { return }
            var matches: Set<Int64>?
            switch answer {
            case .notAsked: matches = nil
            case .matches(let keys): matches = keys
            case .failed(let error):
                context.logger.error("controller of \(T.entityName) could not ask which objects match: \(error)")
                deliver(error)
            }
            diff = processBatch(batch, matches: matches)
        }
        guard !diff.0.isEmpty else { return }
        var changes = changeSet(from: diff.0, oldSections: oldSections, oldCount: oldCount)
        changes.deletedObjectIDs = diff.1
        deliver(changes)
    }

    /// Applies a batch to the members; returns the diff and the IDs of the objects that
    /// left, in the order of their old indexes.
    private func apply(
        leaving: [ObjectID], staying: [OrderedMembers<T>.Entry],
        entering: [OrderedMembers<T>.Entry]
    ) -> (MembershipDiff, [ObjectID]) {
        let diff = members.apply(leaving: leaving, staying: staying, entering: entering)
        return (diff, members.lastDeleted)
    }

    /// Members first shown unsaved and saved since are filed under their permanent IDs.
    private func refileTemporaryIDs() {
        guard !temporaryIDs.isEmpty else { return }
        for id in temporaryIDs {
            guard let member = members.member(id) else {
                temporaryIDs.remove(id)
                continue
            }
            let current = member.element.objectID
            if current != id {
                members.rekey(from: id, to: current)
                temporaryIDs.remove(id)
            }
        }
    }

    /// Saves of given objects are updates, deletions leave; nothing enters.
    private func processGivenObjects(_ changes: ContextChanges) -> (MembershipDiff, [ObjectID]) {
        var leaving: [ObjectID] = []
        var staying: [OrderedMembers<T>.Entry] = []
        for id in changes.deleted where members.member(id) != nil { leaving.append(id) }
        for id in changes.inserted.union(changes.updated) {
            guard let member = members.member(id) else { continue }
            if member.element.isMissingFromStore || filter.map({ !$0(member.element) }) == true {
                leaving.append(id)
            } else {
                staying.append(.init(id: id, element: member.element, key: member.key))
            }
        }
        return apply(leaving: leaving, staying: staying, entering: [])
    }

    /// Decides, for each changed row of the entity, whether it is shown now: by the
    /// database's answer, in memory for objects with unsaved changes (when the request
    /// includes pending changes), or — when nothing was asked — as before.
    private func processBatch(_ batch: EntityChangeBatch, matches: Set<Int64>?) -> (MembershipDiff, [ObjectID]) {
        guard let request = fetchRequest else { return (MembershipDiff(), []) }
        var leaving: [ObjectID] = []
        for id in batch.deleted where members.member(id) != nil { leaving.append(id) }
        let evaluator = PredicateEvaluator(model: context.coordinator.model)
        let mayHavePending = request.includesPendingChanges && context.hasPendingChanges
        var shown: [(id: ObjectID, object: T, isMember: Bool)] = []
        for (id, registered) in zip(batch.candidates, batch.objects) {
            let member = members.member(id)
            let current = registered.flatMap(Self.asT)
            var isMatch: Bool
            if let current, mayHavePending, context.hasPendingChanges(current) {
                do {
                    isMatch = try !current.deletedFlag && (request.predicate.map { try evaluator.evaluate($0, on: current) } ?? true)
                } catch {
                    deliver(error)
                    isMatch = member != nil
                }
            } else if let matches, let key = id.primaryKey {
                isMatch = current != nil && matches.contains(key)
            } else if member == nil, filter != nil, let current {
                // Left out by the filter before (or by the predicate: nothing says which),
                // and the change may make the filter say yes: ask the predicate here.
                do {
                    isMatch = try request.predicate.map { try evaluator.evaluate($0, on: current) } ?? true
                } catch {
                    deliver(error)
                    isMatch = false
                }
            } else {
                isMatch = member != nil
            }
            guard let object = current ?? member?.element else { continue }
            if object.isMissingFromStore || (object.deletedFlag && request.includesPendingChanges) { isMatch = false }
            if isMatch, let filter, !filter(object) { isMatch = false }
            if isMatch {
                shown.append((id, object, member != nil))
            } else if member != nil {
                leaving.append(id)
            }
        }
        let newcomers = shown.filter { !$0.isMember }.map { $0.object as ManagedObject }
        if !newcomers.isEmpty, let entity = membershipEntity {
            let paths = order.relationshipPaths + request.relationshipKeyPathsForPrefetching
            do {
                try context.prefetch(paths, for: newcomers, entity: entity)
            } catch {
                context.logger.warning("loading relationships of new controller objects failed: \(error)")
            }
        }
        var staying: [OrderedMembers<T>.Entry] = []
        var entering: [OrderedMembers<T>.Entry] = []
        for (id, object, isMember) in shown {
            let key = sortKey(for: object)
            guard window.contains(key) else {
                if isMember { leaving.append(id) }
                continue
            }
            if isMember {
                staying.append(.init(id: id, element: object, key: key))
            } else {
                entering.append(.init(id: id, element: object, key: key))
                if id.isTemporaryID { temporaryIDs.insert(id) }
            }
        }
        return apply(leaving: leaving, staying: staying, entering: entering)
    }

    /// The public change set of a diff, with sections and index paths.
    func changeSet(from diff: MembershipDiff, oldSections: [ControllerSection], oldCount: Int) -> ControllerChanges {
        sectionList = computeSections()
        var changes = ControllerChanges(kind: .changed)
        changes.deleted = diff.deleted
        changes.inserted = diff.inserted
        changes.updated = diff.updated
        changes.moved = diff.moved
        if sectionNameKeyPath != nil {
            let oldNames = Set(oldSections.map(\.name))
            let newNames = Set(sectionList.map(\.name))
            changes.deletedSections = IndexSet(oldSections.indices.filter { !newNames.contains(oldSections[$0].name) })
            changes.insertedSections = IndexSet(sectionList.indices.filter { !oldNames.contains(sectionList[$0].name) })
        } else {
            if oldCount == 0 && !sectionList.isEmpty { changes.insertedSections = [0] }
            if oldCount > 0 && sectionList.isEmpty { changes.deletedSections = [0] }
        }
        changes.deletedIndexPaths = diff.deleted.map { oldSections.indexPath(of: $0) }
        changes.insertedIndexPaths = diff.inserted.map { sectionList.indexPath(of: $0) }
        changes.updatedIndexPaths = diff.updated.map { sectionList.indexPath(of: $0) }
        changes.movedIndexPaths = diff.moved.map {
            ControllerIndexPathMove(from: oldSections.indexPath(of: $0.from), to: sectionList.indexPath(of: $0.to))
        }
        let elements = members.elements
        changes.insertedObjectIDs = diff.inserted.map { elements[$0].objectID }
        changes.updatedObjectIDs = diff.updated.map { elements[$0].objectID }
        changes.objectCount = members.count
        changes.isLargeChange = diff.deleted.count + diff.inserted.count + diff.updated.count > largeChangeThreshold
        return changes
    }
}

extension ManagedObjectController {
    /// An object of the controller's entity as `T` (objects of an entity are created as
    /// its class, so the check is a type comparison, not a dynamic cast).
    static func asT(_ object: ManagedObject) -> T? { ManagedObject.cast(object, to: T.self) }
}

extension ManagedObjectContext {
    /// Whether the context has unsaved changes of any object.
    var hasPendingChanges: Bool { !insertedSet.isEmpty || !changedSet.isEmpty || !deletedSet.isEmpty }

    /// Whether an object has unsaved changes here (inserted, changed or deleted).
    func hasPendingChanges(_ object: ManagedObject) -> Bool {
        insertedSet.contains(object) || changedSet.contains(object) || deletedSet.contains(object)
    }
}
