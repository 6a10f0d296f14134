/// What happens to related objects when an object is deleted.
public enum DeleteRule: String, Sendable {
    /// Related objects stay; their reference to the deleted object becomes `nil`.
    case nullify
    /// Related objects are deleted too.
    case cascade
    /// The delete is refused (at save) while related objects exist.
    case deny
    /// Nothing is done to related objects.
    case noAction
}

/// Implemented by `Relationship` so the model can read declarations through reflection.
protocol RelationshipDeclaration {
    func describe(name: String, index: Int) -> RelationshipDescription
}

/// A property wrapper that can carry a mark while the model finds it by reflection.
@usableFromInline
protocol SlotHolder {
    var slot: Int { get set }
    static var isAttribute: Bool { get }
}

/// What the model knows about one relationship.
public final class RelationshipDescription: @unchecked Sendable, CustomStringConvertible {
    // Sendable: `inverseName`, `destinationEntityName`, `columnName` and `joinTable` are
    // filled in while the model is built, before the description is shared; everything
    // is read-only afterwards.
    /// The Swift property name.
    public let name: String
    /// The related entity's class (a `ManagedObject` subclass).
    public let destinationType: any EntityObject.Type
    /// Whether this is a to-many relationship.
    public let isToMany: Bool
    /// The relationship on the other side, if declared.
    public internal(set) var inverseName: String?
    /// What deleting the source object does to the related objects.
    public let deleteRule: DeleteRule
    /// The foreign-key column of a to-one relationship; `nil` for to-many relationships
    /// and for the side of a one-to-one relationship whose partner holds the key.
    public internal(set) var columnName: String?
    /// The join table of a many-to-many relationship; `nil` otherwise.
    public internal(set) var joinTable: JoinTableDescription?
    /// Whether the relationship is one side of a one-to-one relationship (to-one on both
    /// sides).
    public internal(set) var isOneToOne = false
    /// Position among the entity's relationships.
    let index: Int
    /// The related entity's name, filled in when the model is built.
    public internal(set) var destinationEntityName: String = ""
    /// The root of the related entity's hierarchy (the related entity itself outside
    /// one): the entity name of the related objects' IDs, filled in when the model is
    /// built.
    var destinationRootName: String = ""
    /// `column:` as declared (`nil` when left to the default).
    let declaredColumn: String?
    /// `joinTable:` as declared.
    let declaredJoinTable: String?
    /// Whether a save refuses an object whose to-one relationship points at nothing
    /// (`@Relationship(inverse:required: true)`; Core Data's non-optional relationship).
    public let isRequired: Bool

    init(
        name: String, destinationType: any EntityObject.Type, isToMany: Bool, inverseName: String?,
        deleteRule: DeleteRule, columnName: String?, index: Int, declaredColumn: String? = nil,
        declaredJoinTable: String? = nil, isRequired: Bool = false
    ) {
        self.name = name
        self.destinationType = destinationType
        self.isToMany = isToMany
        self.inverseName = inverseName
        self.deleteRule = deleteRule
        self.columnName = columnName
        self.index = index
        self.declaredColumn = declaredColumn
        self.declaredJoinTable = declaredJoinTable
        self.isRequired = isRequired
    }

    /// Whether the relationship is many-to-many (kept in a join table).
    public var isManyToMany: Bool { joinTable != nil }

    /// Whether this side holds a foreign-key column in its own table.
    public var hasForeignKey: Bool { columnName != nil }

    /// `name -> Destination`, `name ->> Destination`, or `name <<->> Destination` for
    /// many-to-many.
    public var description: String {
        "\(name) \(isManyToMany ? "<<->>" : isToMany ? "->>" : "->") \(destinationEntityName)"
            + (inverseName.map { " (inverse \($0))" } ?? "")
            + (joinTable.map { " via \($0.tableName)" } ?? "")
    }
}
