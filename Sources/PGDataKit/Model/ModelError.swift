/// The model declarations are inconsistent; every problem is listed.
///
/// For example:
///
/// ```swift
/// do {
///     _ = try Model(entities: [User.self, Post.self])
/// } catch let error as ModelError {
///     for problem in error.problems where problem.code == .missingInverse {
///         print("fix \(problem.entity ?? "").\(problem.relationship ?? "")")
///     }
/// }
/// ```
public struct ModelError: Error, Sendable, CustomStringConvertible {
    /// One problem of the declarations: a `code`, the sentence that says it (`description`), and
    /// the names it is about.
    ///
    /// A struct rather than an enum, so a later version can add codes without breaking a caller's
    /// `switch`; the static functions named like the codes build one, and values compare equal when
    /// code and names are equal.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// Which problem of the declarations.
        public struct Code: Sendable, Hashable, CustomStringConvertible {
            private let name: String

            private init(_ name: String) { self.name = name }

            /// Two classes declare the same entity name.
            public static let duplicateEntity = Code("duplicateEntity")
            /// The entity has no `@Attribute` or `@Relationship` property.
            public static let noProperties = Code("noProperties")
            /// Several properties map to one column.
            public static let duplicateColumn = Code("duplicateColumn")
            /// A property maps to the primary-key or version column.
            public static let reservedColumn = Code("reservedColumn")
            /// A unique key names an attribute the entity does not have.
            public static let unknownUniqueKeyAttribute = Code("unknownUniqueKeyAttribute")
            /// A relationship points at a class that is not an entity of the model.
            public static let unknownDestination = Code("unknownDestination")
            /// The named inverse (`Entity.relationship`) does not exist.
            public static let missingInverse = Code("missingInverse")
            /// The inverse points at another entity.
            public static let inverseDestinationMismatch = Code("inverseDestinationMismatch")
            /// The two sides name different inverses.
            public static let inverseDisagreement = Code("inverseDisagreement")
            /// A to-many relationship has no inverse.
            public static let toManyWithoutInverse = Code("toManyWithoutInverse")
            /// A relationship names itself as its inverse.
            public static let ownInverse = Code("ownInverse")
            /// Neither side of a one-to-one relationship (`Entity.relationship` and `inverse`)
            /// names its `column:`, so it is not said which table holds the foreign key.
            public static let oneToOneForeignKeyUnspecified = Code("oneToOneForeignKeyUnspecified")
            /// Both sides of a one-to-one relationship name a `column:`; only one may hold the
            /// foreign key.
            public static let oneToOneForeignKeyOnBothSides = Code("oneToOneForeignKeyOnBothSides")
            /// `joinTable:` or `column:` on a to-many relationship whose inverse is to-one (a
            /// one-to-many relationship has no join table; its inverse names the column).
            public static let joinTableWithoutManyToMany = Code("joinTableWithoutManyToMany")
            /// The two sides of a many-to-many relationship name different join tables.
            public static let joinTableDisagreement = Code("joinTableDisagreement")
            /// Both columns of a join table have the same name (a relationship between objects of
            /// one entity needs `column:` on both sides).
            public static let joinColumnsCollide = Code("joinColumnsCollide")
            /// Several many-to-many relationships (each as `Entity.relationship`) use one join
            /// table; name the others' tables with `joinTable:`.
            public static let joinTableShared = Code("joinTableShared")

            /// The code's name, such as `duplicateEntity`.
            public var description: String { name }
        }

        /// Which problem of the declarations.
        public let code: Code
        /// One sentence.
        public let description: String
        /// The entity the problem is in (all but `joinTableShared`).
        public private(set) var entity: String?
        /// The relationship, by name, of the relationship problems.
        public private(set) var relationship: String?
        /// The inverse as named (`Entity.relationship`, or as declared).
        public private(set) var inverse: String?
        /// The class a relationship points at (`unknownDestination`).
        public private(set) var destination: String?
        /// The entity the inverse points at (`inverseDestinationMismatch`).
        public private(set) var inverseDestination: String?
        /// The unknown attribute a unique key names (`unknownUniqueKeyAttribute`).
        public private(set) var attribute: String?
        /// The column (`duplicateColumn`, `reservedColumn`, `joinColumnsCollide`).
        public private(set) var column: String?
        /// The join table (`joinColumnsCollide`, `joinTableShared`).
        public private(set) var table: String?
        /// The join tables the two sides name (`joinTableDisagreement`).
        public private(set) var tables: [String] = []
        /// The relationships sharing a join table, each as `Entity.relationship`
        /// (`joinTableShared`).
        public private(set) var relationships: [String] = []

        private init(_ code: Code, _ description: String) {
            self.code = code
            self.description = description
        }

        /// Two classes declare the same entity name.
        public static func duplicateEntity(entity: String) -> Problem {
            var value = Problem(.duplicateEntity, "entity \(entity) is declared twice")
            value.entity = entity
            return value
        }

        /// The entity has no `@Attribute` or `@Relationship` property.
        public static func noProperties(entity: String) -> Problem {
            var value = Problem(
                .noProperties,
                "entity \(entity) declares no @Attribute or @Relationship properties")
            value.entity = entity
            return value
        }

        /// Several properties map to one column.
        public static func duplicateColumn(entity: String, column: String) -> Problem {
            var value = Problem(
                .duplicateColumn,
                "entity \(entity) maps several properties to column \(column)")
            value.entity = entity
            value.column = column
            return value
        }

        /// A property maps to the primary-key or version column.
        public static func reservedColumn(entity: String, column: String) -> Problem {
            var value = Problem(
                .reservedColumn,
                "entity \(entity): column \(column) is the primary key or version column; choose "
                    + "another column for the property")
            value.entity = entity
            value.column = column
            return value
        }

        /// A unique key names an attribute the entity does not have.
        public static func unknownUniqueKeyAttribute(entity: String, attribute: String) -> Problem {
            var value = Problem(
                .unknownUniqueKeyAttribute,
                "entity \(entity): unique key names unknown attribute \(attribute)")
            value.entity = entity
            value.attribute = attribute
            return value
        }

        /// A relationship points at a class that is not an entity of the model.
        public static func unknownDestination(
            entity: String, relationship: String, destination: String
        ) -> Problem {
            var value = Problem(
                .unknownDestination,
                "\(entity).\(relationship) points at \(destination), which is not an entity of the "
                    + "model")
            value.entity = entity
            value.relationship = relationship
            value.destination = destination
            return value
        }

        /// The named inverse (`Entity.relationship`) does not exist.
        public static func missingInverse(entity: String, relationship: String, inverse: String) -> Problem {
            var value = Problem(
                .missingInverse,
                "\(entity).\(relationship): inverse \(inverse) does not exist")
            value.entity = entity
            value.relationship = relationship
            value.inverse = inverse
            return value
        }

        /// The inverse points at another entity.
        public static func inverseDestinationMismatch(
            entity: String, relationship: String, inverse: String, inverseDestination: String
        ) -> Problem {
            var value = Problem(
                .inverseDestinationMismatch,
                "\(entity).\(relationship): inverse \(inverse) points at \(inverseDestination), "
                    + "not \(entity)")
            value.entity = entity
            value.relationship = relationship
            value.inverse = inverse
            value.inverseDestination = inverseDestination
            return value
        }

        /// The two sides name different inverses.
        public static func inverseDisagreement(
            entity: String, relationship: String, inverse: String
        ) -> Problem {
            var value = Problem(
                .inverseDisagreement,
                "\(entity).\(relationship) and \(inverse) disagree about their inverse")
            value.entity = entity
            value.relationship = relationship
            value.inverse = inverse
            return value
        }

        /// A to-many relationship has no inverse.
        public static func toManyWithoutInverse(entity: String, relationship: String) -> Problem {
            var value = Problem(
                .toManyWithoutInverse,
                "\(entity).\(relationship): a to-many relationship needs an inverse (a to-one "
                    + "relationship holding the foreign key, or a to-many relationship for many-to-many)")
            value.entity = entity
            value.relationship = relationship
            return value
        }

        /// A relationship names itself as its inverse.
        public static func ownInverse(entity: String, relationship: String) -> Problem {
            var value = Problem(
                .ownInverse,
                "\(entity).\(relationship) names itself as its inverse; declare two relationships")
            value.entity = entity
            value.relationship = relationship
            return value
        }

        /// Neither side of a one-to-one relationship (`Entity.relationship` and `inverse`) names
        /// its `column:`, so it is not said which table holds the foreign key.
        public static func oneToOneForeignKeyUnspecified(
            entity: String, relationship: String, inverse: String
        ) -> Problem {
            var value = Problem(
                .oneToOneForeignKeyUnspecified,
                "\(entity).\(relationship) and \(inverse) are one-to-one: give column: on the side "
                    + "whose table holds the foreign key")
            value.entity = entity
            value.relationship = relationship
            value.inverse = inverse
            return value
        }

        /// Both sides of a one-to-one relationship name a `column:`; only one may hold the foreign
        /// key.
        public static func oneToOneForeignKeyOnBothSides(
            entity: String, relationship: String, inverse: String
        ) -> Problem {
            var value = Problem(
                .oneToOneForeignKeyOnBothSides,
                "\(entity).\(relationship) and \(inverse) are one-to-one and both name a column: "
                    + "only one side holds the foreign key; remove column: from the other")
            value.entity = entity
            value.relationship = relationship
            value.inverse = inverse
            return value
        }

        /// `joinTable:` or `column:` on a to-many relationship whose inverse is to-one (a
        /// one-to-many relationship has no join table; its inverse names the column).
        public static func joinTableWithoutManyToMany(entity: String, relationship: String) -> Problem {
            var value = Problem(
                .joinTableWithoutManyToMany,
                "\(entity).\(relationship): joinTable: and column: are for many-to-many "
                    + "relationships; its inverse is to-one, so the inverse's foreign key holds it")
            value.entity = entity
            value.relationship = relationship
            return value
        }

        /// The two sides of a many-to-many relationship name different join tables.
        public static func joinTableDisagreement(
            entity: String, relationship: String, inverse: String, tables: [String]
        ) -> Problem {
            var value = Problem(
                .joinTableDisagreement,
                "\(entity).\(relationship) and \(inverse) name different join tables: "
                    + tables.joined(separator: ", "))
            value.entity = entity
            value.relationship = relationship
            value.inverse = inverse
            value.tables = tables
            return value
        }

        /// Both columns of a join table have the same name (a relationship between objects of one
        /// entity needs `column:` on both sides).
        public static func joinColumnsCollide(
            entity: String, relationship: String, table: String, column: String
        ) -> Problem {
            var value = Problem(
                .joinColumnsCollide,
                "\(entity).\(relationship): both columns of join table \(table) are named "
                    + "\(column); name them with column: on both sides")
            value.entity = entity
            value.relationship = relationship
            value.table = table
            value.column = column
            return value
        }

        /// Several many-to-many relationships (each as `Entity.relationship`) use one join table;
        /// name the others' tables with `joinTable:`.
        public static func joinTableShared(table: String, relationships: [String]) -> Problem {
            var value = Problem(
                .joinTableShared,
                "join table \(table) is used by " + relationships.joined(separator: " and ")
                    + "; name the others' tables with joinTable:")
            value.table = table
            value.relationships = relationships
            return value
        }
    }

    /// Every problem found.
    public let problems: [Problem]

    /// All problems, one per line.
    public var description: String {
        "the model is invalid:\n" + problems.map { "- \($0)" }.joined(separator: "\n")
    }
}
