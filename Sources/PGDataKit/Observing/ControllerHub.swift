import Foundation
import Synchronization

/// The changes of one entity in a change set.
struct EntityChangeBatch {
    let entity: EntityDescription
    var inserted: [ObjectID] = []
    var updated: [ObjectID] = []
    var deleted: [ObjectID] = []
    /// Inserted and updated IDs with a primary key, without the deleted ones (set by
    /// `sealed()`).
    private(set) var candidates: [ObjectID] = []
    /// The context's object of each candidate, looked up once for every controller after
    /// the membership statement registered new rows (set by `resolved(in:)`).
    private(set) var objects: [ManagedObject?] = []

    /// The batch with its candidates worked out once for every controller.
    func sealed() -> EntityChangeBatch {
        var batch = self
        let gone = Set(deleted)
        batch.candidates = (inserted + updated).filter { $0.primaryKey != nil && !gone.contains($0) }
        return batch
    }

    /// The batch with each candidate's registered object.
    func resolved(in context: ManagedObjectContext) -> EntityChangeBatch {
        var batch = self
        batch.objects = candidates.map { context.registeredObject(for: $0) }
        return batch
    }
}

/// What the database said about a client's condition.
enum MembershipAnswerForClient {
    /// The client did not need to ask.
    case notAsked
    /// The primary keys (among those asked) that match now.
    case matches(Set<Int64>)
    /// Asking failed.
    case failed(any Error)
}

/// Whether a client needs the database to decide membership for a batch.
enum MembershipNeed {
    case none
    /// Its condition (`nil`: every row), compiled with the shared compiler.
    case condition(String?)
}

/// A controller as the hub sees it.
protocol ControllerClient: AnyObject, Sendable {
    /// The entity whose rows the client shows; `nil` for a fixed set of objects.
    var membershipEntity: EntityDescription? { get }
    /// Whether the client needs the database's answer for a batch. Runs on the context's
    /// queue.
    func needsMembership(for batch: EntityChangeBatch, changes: ContextChanges) -> Bool
    /// Whether it may need it, from immutable state (any thread).
    func mayNeedMembership(for batch: EntityChangeBatch, changes: ContextChanges) -> Bool
    /// The client's condition (`nil`: every row), compiled with `compiler`; from
    /// immutable state, so any thread may ask. `nil` for a client that asks nothing (a
    /// fixed set of objects, or stopped).
    func membershipCondition(compiler: inout PredicateSQLCompiler) throws -> MembershipNeed
    /// Applies a change set. Runs on the context's queue.
    func process(_ changes: ContextChanges, batch: EntityChangeBatch?, answer: MembershipAnswerForClient)
    /// The coordinator was closed. Runs on the context's queue.
    func coordinatorDidClose()
}

/// The observation all controllers and object observers of one context share: one
/// did-change and one did-save observer on the context and, per change set, one
/// membership statement per entity for all controllers of that entity — so each
/// controller costs at most one statement per change set, usually a fraction of one.
final class ControllerHub: @unchecked Sendable {
    // Sendable: the client and object-observer lists are behind `lock`; everything else
    // is used on the context's queue only (the observers run there).

    private struct WeakClient {
        weak var client: (any ControllerClient)?
    }

    /// A per-object observer (see `ManagedObject.observeChanges`).
    private struct ObjectObserver {
        weak var object: ManagedObject?
        let handler: (Set<String>) -> Void
    }

    let context: ManagedObjectContext
    private let lock = NSLock()
    /// Membership answers asked for while the context merges (see `prepare(_:)`).
    let early = Mutex(EarlyState())
    let earlyQueue = DispatchQueue(label: "pgdatakit.controllers.membership")
    private var clients: [Int: WeakClient] = [:]
    private var objectObservers: [ObjectID: [Int: ObjectObserver]] = [:]
    private var nextID = 0
    private var tokens: [ObserverToken] = []

    private init(context: ManagedObjectContext) {
        self.context = context
    }

    /// The hub of a context, made on first use: the context holds it (weakly, as an
    /// attachment; its controllers and observer tokens keep it alive).
    static func hub(for context: ManagedObjectContext) -> ControllerHub {
        let (hub, isNew) = context.attachment(ControllerHub.self) { ControllerHub(context: context) }
        if isNew { hub.start() }
        return hub
    }

    private func start() {
        let didChange = context.observeObjectsDidChange { [weak self] changes in self?.handle(changes) }
        let didSave = context.observeDidSave { [weak self] changes in self?.handle(changes) }
        let closing = context.coordinator.observeClose { [weak self] in
            guard let self else { return }
            self.context.perform { [weak self] in self?.coordinatorDidClose() }
        }
        var tokens = [didChange, didSave, closing]
        if let remote = observeRemoteChangesEarly() { tokens.append(remote) }
        lock.withLock { self.tokens = tokens }
    }

    // MARK: - Registration

    /// Adds a client (kept weakly); the returned id removes it.
    func add(_ client: any ControllerClient) -> Int {
        lock.withLock {
            let id = nextID
            nextID += 1
            clients[id] = WeakClient(client: client)
            return id
        }
    }

    func remove(_ id: Int) {
        _ = lock.withLock { clients.removeValue(forKey: id) }
    }

    /// Adds an object observer; the token removes it. The hub lives while the token does.
    func observe(_ object: ManagedObject, _ handler: @escaping (Set<String>) -> Void) -> ObserverToken {
        let id = object.objectID
        let number = lock.withLock { () -> Int in
            let number = nextID
            nextID += 1
            objectObservers[id, default: [:]][number] = ObjectObserver(object: object, handler: handler)
            return number
        }
        return ObserverToken { [self] in
            lock.withLock {
                for (key, var observers) in objectObservers where observers[number] != nil {
                    observers.removeValue(forKey: number)
                    objectObservers[key] = observers.isEmpty ? nil : observers
                }
            }
        }
    }

    var liveClients: [any ControllerClient] {
        lock.withLock {
            clients = clients.filter { $0.value.client != nil }
            return clients.sorted { $0.key < $1.key }.compactMap(\.value.client)
        }
    }

    // MARK: - Change sets

    private func coordinatorDidClose() {
        for client in liveClients { client.coordinatorDidClose() }
    }

    /// A change set's changes by entity (by the root entity of a hierarchy, the name
    /// its objects' IDs carry), with their candidates worked out.
    static func batches(of changes: ContextChanges, model: Model) -> [String: EntityChangeBatch] {
        var batches: [String: EntityChangeBatch] = [:]
        func add(_ ids: Set<ObjectID>, _ path: WritableKeyPath<EntityChangeBatch, [ObjectID]>) {
            for id in ids {
                guard let entity = model.entity(named: id.entityName) else { continue }
                batches[id.entityName, default: EntityChangeBatch(entity: entity)][keyPath: path].append(id)
            }
        }
        add(changes.inserted, \.inserted)
        add(changes.updated, \.updated)
        add(changes.deleted, \.deleted)
        return batches.mapValues { $0.sealed() }
    }

    /// Runs on the context's queue after a merge or a save.
    private func handle(_ changes: ContextChanges) {
        notifyObjectObservers(changes)
        let clients = liveClients
        guard !clients.isEmpty else { return }
        context.coordinator.tracing.withSpan(PGDataKitTracing.refresh) { span in
            if let span {
                span.set([PGDataKitTracing.controllers: .int64(Int64(clients.count))])
                let entities = Set(clients.compactMap { $0.membershipEntity?.name })
                if entities.count == 1, let name = entities.first, let entity = context.coordinator.model.entity(named: name) {
                    span.set([PGDataKitTracing.entity: .string(name), PGDataKitTracing.collectionName: .string(entity.tableName)])
                }
            }
            refresh(clients, after: changes)
        }
    }

    /// Brings the controllers up to date after `changes`: one membership query per
    /// entity they need one for, then each controller's change set.
    private func refresh(_ clients: [any ControllerClient], after changes: ContextChanges) {
        let model = context.coordinator.model
        var batches = Self.batches(of: changes, model: model)
        let prepared = takeEarlyMembership(for: changes)
        var answers: [ObjectIdentifier: MembershipAnswerForClient] = [:]
        for (name, batch) in batches.sorted(by: { $0.key < $1.key }) {
            let asking = clients.filter { $0.membershipEntity?.rootEntityName == name }
            guard !asking.isEmpty, !batch.candidates.isEmpty else { continue }
            let needing = asking.filter { $0.needsMembership(for: batch, changes: changes) }
            guard !needing.isEmpty else { continue }
            if let outcome = prepared?.outcomes[name], case .success(let answer) = outcome.result,
                needing.allSatisfy({ outcome.conditions[ObjectIdentifier($0)] != nil })
            {
                let askers = needing.compactMap { client in outcome.conditions[ObjectIdentifier(client)].map { (client, $0) } }
                record(answer, of: batch, for: askers, into: &answers)
                continue
            }
            let keys = batch.candidates.compactMap(\.primaryKey)
            var compiler = PredicateSQLCompiler(model: model, parameters: [keys])
            var query = MembershipQuery(keys: keys)
            var askers: [(client: any ControllerClient, condition: Int)] = []
            for client in needing {
                do {
                    if case .condition(let condition) = try client.membershipCondition(compiler: &compiler) {
                        askers.append((client, query.conditions.count))
                        query.conditions.append(condition)
                    }
                } catch {
                    answers[ObjectIdentifier(client)] = .failed(error)
                }
            }
            guard !askers.isEmpty else { continue }
            query.parameters = Array(compiler.parameters.dropFirst())
            do {
                // Retried on a lost connection: a controller that missed this answer
                // would differ from the database until those objects change again.
                let answer = try context.retryingLostConnections("asking which changed \(name) objects match") {
                    try context.withDatabase {
                        try context.coordinator.selectMembership(of: batch.entity, query, on: $0)
                    }
                }
                record(answer, of: batch, for: askers, into: &answers)
            } catch {
                context.logger.error("asking which changed \(name) objects match the controllers failed: \(error)")
                for asker in askers { answers[ObjectIdentifier(asker.client)] = .failed(error) }
            }
        }
        batches = batches.mapValues { $0.resolved(in: context) }
        for client in clients {
            let batch = client.membershipEntity.flatMap { batches[$0.rootEntityName] }
            client.process(changes, batch: batch, answer: answers[ObjectIdentifier(client)] ?? .notAsked)
        }
    }

    /// Registers the rows of an answer (those newer than the context's objects) and
    /// notes which keys match each asker's condition.
    private func record(
        _ answer: MembershipAnswer, of batch: EntityChangeBatch, for askers: [(client: any ControllerClient, condition: Int)],
        into answers: inout [ObjectIdentifier: MembershipAnswerForClient]
    ) {
        var matched = [Set<Int64>](repeating: [], count: askers.count)
        // A hierarchy's rows are of several entities: the answer's columns are the root's,
        // so the rows that match are read again as objects of their own entities.
        let hierarchy = batch.entity.hasSubentities
        var unregistered: [Int64] = []
        do {
            for row in answer.rows {
                let key = try ManagedObjectContext.decodeInteger(row, column: 0)
                // Rows the merge already refreshed (or refreshed past) are not applied again.
                let registered = context.registeredObject(for: ObjectID(entityName: batch.entity.rootEntityName, primaryKey: key))
                if registered.map({ $0.storage.version < (try? ManagedObjectContext.decodeInteger(row, column: 1)) ?? 0 }) ?? true {
                    if hierarchy { unregistered.append(key) } else { _ = try context.register(row: row, entity: batch.entity) }
                }
                let flags = try answer.flags(of: row)
                for (position, asker) in askers.enumerated() where MembershipAnswer.flags(flags, match: asker.condition) {
                    matched[position].insert(key)
                }
            }
            if !unregistered.isEmpty { _ = try context.fetchObjects(entity: batch.entity, .keys(unregistered, of: batch.entity)) }
        } catch {
            context.logger.error("reading which changed \(batch.entity.name) objects match the controllers failed: \(error)")
            for asker in askers { answers[ObjectIdentifier(asker.client)] = .failed(error) }
            return
        }
        for (position, asker) in askers.enumerated() {
            answers[ObjectIdentifier(asker.client)] = .matches(matched[position])
        }
    }

    /// Calls the observers of updated and deleted objects (on the context's queue).
    private func notifyObjectObservers(_ changes: ContextChanges) {
        let calls = lock.withLock { () -> [(handler: (Set<String>) -> Void, keys: Set<String>)] in
            guard !objectObservers.isEmpty else { return [] }
            // Objects saved for the first time now have permanent IDs.
            for (id, observers) in objectObservers where id.isTemporaryID {
                guard let current = observers.values.first(where: { $0.object != nil })?.object?.objectID,
                    current != id
                else { continue }
                objectObservers.removeValue(forKey: id)
                objectObservers[current, default: [:]].merge(observers) { first, _ in first }
            }
            var calls: [(handler: (Set<String>) -> Void, keys: Set<String>)] = []
            for id in changes.updated {
                guard let observers = objectObservers[id] else { continue }
                let keys = changes.changedKeys[id] ?? []
                for (_, observer) in observers.sorted(by: { $0.key < $1.key }) where observer.object != nil {
                    calls.append((observer.handler, keys))
                }
            }
            for id in changes.deleted {
                guard let observers = objectObservers.removeValue(forKey: id) else { continue }
                for (_, observer) in observers.sorted(by: { $0.key < $1.key }) where observer.object != nil {
                    calls.append((observer.handler, []))
                }
            }
            return calls
        }
        for call in calls { call.handler(call.keys) }
    }
}
