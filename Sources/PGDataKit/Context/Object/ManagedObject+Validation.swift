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

    /// Every rule the object breaks for a write of `kind`: its attributes' rules (not for
    /// a delete), then what its `validateFor…` hook throws (a `ObjectValidationError`'s failures,
    /// or any other error as one failure).
    func validationFailures(for kind: ValidationKind) -> [ValidationFailure] {
        var failures: [ValidationFailure] = []
        let entity = self.entity
        if kind != .delete && !entity.validatedAttributes.isEmpty {
            prepareStorage()
            for attribute in entity.validatedAttributes {
                failures += ruleFailures(of: attribute, value: storage.values[attribute.index])
            }
        }
        let rule: ValidationFailure.Rule = switch kind {
        case .insert: .validateForInsert
        case .update: .validateForUpdate
        case .delete: .validateForDelete
        }
        do {
            switch kind {
            case .insert: try validateForInsert()
            case .update: try validateForUpdate()
            case .delete: try validateForDelete()
            }
        } catch let error as ObjectValidationError {
            failures += error.failures
        } catch {
            failures.append(
                ValidationFailure(
                    objectID: objectID, entity: entity.name, attribute: nil, rule: rule, requirement: "pass \(rule)()",
                    underlying: error))
        }
        return failures
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
