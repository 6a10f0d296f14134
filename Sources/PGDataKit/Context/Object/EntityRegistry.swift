import Synchronization

/// Entity descriptions built from classes alone, for objects not yet in a context.
enum EntityRegistry {
    private static let descriptions = Mutex<[ObjectIdentifier: EntityDescription]>([:])

    static func description(for objectClass: any EntityObject.Type) -> EntityDescription {
        if let existing = descriptions.withLock({ $0[ObjectIdentifier(objectClass)] }) { return existing }
        // Built outside the lock: describing instantiates a prototype of the class.
        let built = EntityDescription(objectClass: objectClass)
        return descriptions.withLock { cache in
            if let existing = cache[ObjectIdentifier(objectClass)] { return existing }
            cache[ObjectIdentifier(objectClass)] = built
            return built
        }
    }
}
