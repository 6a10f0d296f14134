import Foundation

/// Which write a validation is for: which hook runs, and whether attribute rules apply.
enum ValidationKind {
    case insert, update, delete
}

extension ManagedObject {
    /// Checks a value against an attribute's type and rules without setting it, as Core
    /// Data's `validateValue(_:forKey:)` does; a relationship's value is not checked.
    ///
    /// For example, `try member.validateValue(200, forKey: "age")` throws when `age`
    /// declares `.range(0...150)`.
    ///
    /// - Throws: `ManagedObjectError.unknownKey`, `.typeMismatch` (as `setValue(_:forKey:)`
    ///   would), or `ObjectValidationError` naming each rule the value breaks.
    public func validateValue(_ value: Any?, forKey key: String) throws {
        checkQueue()
        guard let attribute = entity.attribute(named: key) else {
            if entity.relationship(named: key) != nil { return }
            throw ManagedObjectError.unknownKey(entity: entity.name, key: key)
        }
        guard let stored = attribute.coerce(value) else {
            throw ManagedObjectError.typeMismatch(
                entity: entity.name, key: key, expected: attribute.swiftTypeName,
                actual: value.map { String(describing: type(of: $0)) } ?? "nil")
        }
        let failures = ruleFailures(of: attribute, value: stored)
        if !failures.isEmpty { throw ObjectValidationError(failures) }
    }

    /// Every rule the object breaks for a write of `kind`, `nil` for none: its
    /// attributes' rules (not for a delete), then what its `validateFor…` hook throws (an
    /// `ObjectValidationError`'s failures, or any other error as one failure). Every
    /// object a save or an import writes passes here, so the common case (no rules, the
    /// hook does nothing) makes no array.
    func validationFailures(for kind: ValidationKind) -> [ValidationFailure]? {
        var failures: [ValidationFailure]?
        if kind != .delete && entity.hasRules { failures = propertyRuleFailures() }
        do {
            switch kind {
            case .insert: try validateForInsert()
            case .update: try validateForUpdate()
            case .delete: try validateForDelete()
            }
        } catch {
            failures = (failures ?? []) + hookFailures(error, kind: kind)
        }
        return failures
    }

    /// The rules the object's attribute values and required to-one relationships break
    /// (`nil` for none).
    private func propertyRuleFailures() -> [ValidationFailure]? {
        prepareStorage()
        var failures: [ValidationFailure] = []
        for attribute in entity.validatedAttributes {
            failures += ruleFailures(of: attribute, value: storage.value(at: attribute.index))
        }
        for relationship in entity.validatedRelationships where !pointsAtAnObject(relationship) {
            failures.append(
                ValidationFailure(
                    objectID: objectID, entity: entity.name, attribute: relationship.name, rule: .required,
                    requirement: "be set"))
        }
        return failures.isEmpty ? nil : failures
    }

    /// Whether a to-one relationship points at an object that is not deleted: read from
    /// the foreign key it holds (a reference by key alone is not loaded for it), or, for
    /// the side of a one-to-one relationship whose partner holds the key, from the
    /// relationship (read if not loaded).
    private func pointsAtAnObject(_ relationship: RelationshipDescription) -> Bool {
        guard relationship.hasForeignKey else {
            return relatedObjects(at: relationship.index).contains { !$0.deletedFlag }
        }
        switch storage.toOne[relationship.index] {
        case .none: return false
        case .key: return true
        case .object(let target): return !target.deletedFlag
        }
    }

    /// What a hook threw, as failures: an `ObjectValidationError`'s own, or one holding
    /// the error.
    private func hookFailures(_ error: any Error, kind: ValidationKind) -> [ValidationFailure] {
        if let error = error as? ObjectValidationError { return error.failures }
        let rule: ValidationFailure.Rule = switch kind {
        case .insert: .validateForInsert
        case .update: .validateForUpdate
        case .delete: .validateForDelete
        }
        return [
            ValidationFailure(
                objectID: objectID, entity: entity.name, attribute: nil, rule: rule, requirement: "pass \(rule)()",
                underlying: error)
        ]
    }

    /// The failures of the rules `attribute`'s `value` breaks.
    private func ruleFailures(of attribute: AttributeDescription, value: StoredValue) -> [ValidationFailure] {
        attribute.brokenChecks(of: value).map { check in
            ValidationFailure(
                objectID: objectID, entity: entity.name, attribute: attribute.name, rule: check.rule,
                requirement: check.requirement)
        }
    }
}

extension ValidationFailure {
    /// A failure a `validateFor…` hook reports about its own object (`rule` is
    /// `.custom`).
    ///
    /// For example, in a subclass:
    ///
    /// ```swift
    /// override func validateForUpdate() throws {
    ///     if let ends, let starts, ends < starts {
    ///         throw ObjectValidationError([ValidationFailure(self, attribute: "ends", reason: "end after it starts")])
    ///     }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - object: The object.
    ///   - attribute: The attribute concerned, or `nil` for the whole object.
    ///   - reason: What the object must do, completing "must …"; descriptions show it, so
    ///     it should not hold the object's values.
    public init(_ object: ManagedObject, attribute: String? = nil, reason: String) {
        self.init(
            objectID: object.objectID, entity: object.entity.name, attribute: attribute, rule: .custom,
            requirement: reason)
    }
}
