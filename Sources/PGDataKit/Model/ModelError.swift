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
public struct ModelError: Error, Sendable, DescribedError {
    /// What went wrong, broadly: each problem has a code of its own (`Problem.Code`).
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ModelError.Code.invalidModel { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case invalidModel
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The declarations are inconsistent; `problems` lists how.
        public static let invalidModel = Code(.invalidModel)

        /// The code's name, such as `invalidModel`.
        public var description: String { base.rawValue }
    }

    /// One problem of the declarations: a `code`, the sentence that says it (`description`), and
    /// the names it is about.
    ///
    /// A struct rather than an enum, so a later version can add codes without breaking a caller's
    /// `switch`; the static functions named like the codes build one, and values compare equal when
    /// code and names are equal.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// Which problem of the declarations.
        public struct Code: Sendable, Hashable, CustomStringConvertible {
            /// The codes, one case each: codes compare by case and none is made from a string.
            enum Base: String, Sendable {
                case duplicateEntity, noProperties, duplicateColumn, reservedColumn,
                    unknownUniqueKeyAttribute, unknownDestination, missingInverse,
                    inverseDestinationMismatch, inverseDisagreement, toManyWithoutInverse,
                    ownInverse, oneToOneForeignKeyUnspecified, oneToOneForeignKeyOnBothSides,
                    joinTableWithoutManyToMany, joinTableDisagreement, joinColumnsCollide,
                    joinTableShared, unstorableDefault, nameTooLong, arrayInUniqueKey, invalidRule
            }

            /// Which code this is.
            let base: Base

            private init(_ base: Base) { self.base = base }

            /// Two classes declare the same entity name.
            public static let duplicateEntity = Code(.duplicateEntity)
            /// The entity has no `@Attribute` or `@Relationship` property.
            public static let noProperties = Code(.noProperties)
            /// Several properties map to one column.
            public static let duplicateColumn = Code(.duplicateColumn)
            /// A property maps to the primary-key or version column.
            public static let reservedColumn = Code(.reservedColumn)
            /// A unique key names an attribute the entity does not have.
            public static let unknownUniqueKeyAttribute = Code(.unknownUniqueKeyAttribute)
            /// A relationship points at a class that is not an entity of the model.
            public static let unknownDestination = Code(.unknownDestination)
            /// The named inverse (`Entity.relationship`) does not exist.
            public static let missingInverse = Code(.missingInverse)
            /// The inverse points at another entity.
            public static let inverseDestinationMismatch = Code(.inverseDestinationMismatch)
            /// The two sides name different inverses.
            public static let inverseDisagreement = Code(.inverseDisagreement)
            /// A to-many relationship has no inverse.
            public static let toManyWithoutInverse = Code(.toManyWithoutInverse)
            /// A relationship names itself as its inverse.
            public static let ownInverse = Code(.ownInverse)
            /// Neither side of a one-to-one relationship (`Entity.relationship` and `inverse`)
            /// names its `column:`, so it is not said which table holds the foreign key.
            public static let oneToOneForeignKeyUnspecified = Code(.oneToOneForeignKeyUnspecified)
            /// Both sides of a one-to-one relationship name a `column:`; only one may hold the
            /// foreign key.
            public static let oneToOneForeignKeyOnBothSides = Code(.oneToOneForeignKeyOnBothSides)
            /// `joinTable:` or `column:` on a to-many relationship whose inverse is to-one (a
            /// one-to-many relationship has no join table; its inverse names the column).
            public static let joinTableWithoutManyToMany = Code(.joinTableWithoutManyToMany)
            /// The two sides of a many-to-many relationship name different join tables.
            public static let joinTableDisagreement = Code(.joinTableDisagreement)
            /// Both columns of a join table have the same name (a relationship between objects of
            /// one entity needs `column:` on both sides).
            public static let joinColumnsCollide = Code(.joinColumnsCollide)
            /// Several many-to-many relationships (each as `Entity.relationship`) use one join
            /// table; name the others' tables with `joinTable:`.
            public static let joinTableShared = Code(.joinTableShared)
            /// An attribute's default value cannot be written as SQL for its column (found
            /// when the schema script is generated: `Model.schemaSQL()`).
            public static let unstorableDefault = Code(.unstorableDefault)
            /// A table or column name is longer than PostgreSQL's 63 bytes (found when the
            /// schema script is generated: `Model.schemaSQL()`).
            public static let nameTooLong = Code(.nameTooLong)
            /// A unique key holds an array attribute (`[String]`, …): saves and imports
            /// match a key as one scalar value.
            public static let arrayInUniqueKey = Code(.arrayInUniqueKey)
            /// An attribute's validation rule cannot be used (a `pattern` that is not a
            /// valid regular expression).
            public static let invalidRule = Code(.invalidRule)

            /// The code's name, such as `duplicateEntity`.
            public var description: String { base.rawValue }
        }

        /// Which problem of the declarations.
        public let code: Code
        /// One sentence.
        public let description: String
        /// The entity the problem is in (all but `joinTableShared`).
        public let entity: String?
        /// The relationship, by name, of the relationship problems.
        public let relationship: String?
        /// The inverse as named (`Entity.relationship`, or as declared).
        public let inverse: String?
        /// The class a relationship points at (`unknownDestination`).
        public let destination: String?
        /// The entity the inverse points at (`inverseDestinationMismatch`).
        public let inverseDestination: String?
        /// The unknown attribute a unique key names (`unknownUniqueKeyAttribute`), the
        /// attribute whose default cannot be stored (`unstorableDefault`), or the array
        /// attribute in a unique key (`arrayInUniqueKey`), or the attribute whose rule
        /// cannot be used (`invalidRule`).
        public let attribute: String?
        /// The column (`duplicateColumn`, `reservedColumn`, `joinColumnsCollide`,
        /// `nameTooLong`).
        public let column: String?
        /// The join table (`joinColumnsCollide`, `joinTableShared`), or the table whose
        /// name or column name is too long (`nameTooLong`).
        public let table: String?
        /// The join tables the two sides name (`joinTableDisagreement`).
        public let tables: [String]
        /// The relationships sharing a join table, each as `Entity.relationship`
        /// (`joinTableShared`).
        public let relationships: [String]

        private init(
            _ code: Code, _ description: String,
            entity: String? = nil, relationship: String? = nil, inverse: String? = nil, destination: String? = nil,
            inverseDestination: String? = nil, attribute: String? = nil, column: String? = nil,
            table: String? = nil, tables: [String] = [], relationships: [String] = []
        ) {
            (self.code, self.description) = (code, description)
            self.entity = entity
            self.relationship = relationship
            self.inverse = inverse
            self.destination = destination
            self.inverseDestination = inverseDestination
            self.attribute = attribute
            self.column = column
            self.table = table
            self.tables = tables
            self.relationships = relationships
        }

        /// Two classes declare the same entity name.
        public static func duplicateEntity(entity: String) -> Problem {
            Problem(.duplicateEntity, "entity \(entity) is declared twice", entity: entity)
        }

        /// The entity has no `@Attribute` or `@Relationship` property.
        public static func noProperties(entity: String) -> Problem {
            Problem(
                .noProperties,
                "entity \(entity) declares no @Attribute or @Relationship properties",
                entity: entity)
        }

        /// Several properties map to one column.
        public static func duplicateColumn(entity: String, column: String) -> Problem {
            Problem(
                .duplicateColumn,
                "entity \(entity) maps several properties to column \(column)",
                entity: entity, column: column)
        }

        /// A property maps to the primary-key or version column.
        public static func reservedColumn(entity: String, column: String) -> Problem {
            Problem(
                .reservedColumn,
                "entity \(entity): column \(column) is the primary key or version column; choose "
                    + "another column for the property",
                entity: entity, column: column)
        }

        /// A unique key names an attribute the entity does not have.
        public static func unknownUniqueKeyAttribute(entity: String, attribute: String) -> Problem {
            Problem(
                .unknownUniqueKeyAttribute,
                "entity \(entity): unique key names unknown attribute \(attribute)",
                entity: entity, attribute: attribute)
        }

        /// A unique key holds an array attribute.
        public static func arrayInUniqueKey(entity: String, attribute: String) -> Problem {
            Problem(
                .arrayInUniqueKey,
                "entity \(entity): unique key holds the array attribute \(attribute); arrays cannot be unique keys",
                entity: entity, attribute: attribute)
        }

        /// An attribute's validation rule cannot be used; `reason` says why.
        public static func invalidRule(entity: String, attribute: String, reason: String) -> Problem {
            Problem(.invalidRule, "entity \(entity): attribute \(attribute): \(reason)", entity: entity, attribute: attribute)
        }

        /// A relationship points at a class that is not an entity of the model.
        public static func unknownDestination(entity: String, relationship: String, destination: String) -> Problem {
            Problem(
                .unknownDestination,
                "\(entity).\(relationship) points at \(destination), "
                    + "which is not an entity of the model",
                entity: entity, relationship: relationship, destination: destination)
        }

        /// The named inverse (`Entity.relationship`) does not exist.
        public static func missingInverse(entity: String, relationship: String, inverse: String) -> Problem {
            Problem(
                .missingInverse,
                "\(entity).\(relationship): inverse \(inverse) does not exist",
                entity: entity, relationship: relationship, inverse: inverse)
        }

        /// The inverse points at another entity.
        public static func inverseDestinationMismatch(
            entity: String, relationship: String, inverse: String, inverseDestination: String
        ) -> Problem {
            Problem(
                .inverseDestinationMismatch,
                "\(entity).\(relationship): inverse \(inverse) points at \(inverseDestination), "
                    + "not \(entity)",
                entity: entity, relationship: relationship, inverse: inverse, inverseDestination: inverseDestination)
        }

        /// The two sides name different inverses.
        public static func inverseDisagreement(entity: String, relationship: String, inverse: String) -> Problem {
            Problem(
                .inverseDisagreement,
                "\(entity).\(relationship) and \(inverse) disagree about their inverse",
                entity: entity, relationship: relationship, inverse: inverse)
        }

        /// A to-many relationship has no inverse.
        public static func toManyWithoutInverse(entity: String, relationship: String) -> Problem {
            Problem(
                .toManyWithoutInverse,
                "\(entity).\(relationship): a to-many relationship needs an inverse (a to-one "
                    + "relationship holding the foreign key, or a to-many relationship for many-to-many)",
                entity: entity, relationship: relationship)
        }

        /// A relationship names itself as its inverse.
        public static func ownInverse(entity: String, relationship: String) -> Problem {
            Problem(
                .ownInverse,
                "\(entity).\(relationship) names itself as its inverse; declare two relationships",
                entity: entity, relationship: relationship)
        }

        /// Neither side of a one-to-one relationship (`Entity.relationship` and `inverse`) names
        /// its `column:`, so it is not said which table holds the foreign key.
        public static func oneToOneForeignKeyUnspecified(
            entity: String, relationship: String, inverse: String
        ) -> Problem {
            Problem(
                .oneToOneForeignKeyUnspecified,
                "\(entity).\(relationship) and \(inverse) are one-to-one: give column: on the side "
                    + "whose table holds the foreign key",
                entity: entity, relationship: relationship, inverse: inverse)
        }

        /// Both sides of a one-to-one relationship name a `column:`; only one may hold the foreign
        /// key.
        public static func oneToOneForeignKeyOnBothSides(
            entity: String, relationship: String, inverse: String
        ) -> Problem {
            Problem(
                .oneToOneForeignKeyOnBothSides,
                "\(entity).\(relationship) and \(inverse) are one-to-one and both name a column: "
                    + "only one side holds the foreign key; remove column: from the other",
                entity: entity, relationship: relationship, inverse: inverse)
        }

        /// `joinTable:` or `column:` on a to-many relationship whose inverse is to-one (a
        /// one-to-many relationship has no join table; its inverse names the column).
        public static func joinTableWithoutManyToMany(entity: String, relationship: String) -> Problem {
            Problem(
                .joinTableWithoutManyToMany,
                "\(entity).\(relationship): joinTable: and column: are for many-to-many "
                    + "relationships; its inverse is to-one, so the inverse's foreign key holds it",
                entity: entity, relationship: relationship)
        }

        /// The two sides of a many-to-many relationship name different join tables.
        public static func joinTableDisagreement(
            entity: String, relationship: String, inverse: String, tables: [String]
        ) -> Problem {
            Problem(
                .joinTableDisagreement,
                "\(entity).\(relationship) and \(inverse) name different join tables: "
                    + tables.joined(separator: ", "),
                entity: entity, relationship: relationship, inverse: inverse, tables: tables)
        }

        /// Both columns of a join table have the same name (a relationship between objects of one
        /// entity needs `column:` on both sides).
        public static func joinColumnsCollide(
            entity: String, relationship: String, table: String, column: String
        ) -> Problem {
            Problem(
                .joinColumnsCollide,
                "\(entity).\(relationship): both columns of join table \(table) are named "
                    + "\(column); name them with column: on both sides",
                entity: entity, relationship: relationship, column: column, table: table)
        }

        /// Several many-to-many relationships (each as `Entity.relationship`) use one join table;
        /// name the others' tables with `joinTable:`.
        public static func joinTableShared(table: String, relationships: [String]) -> Problem {
            Problem(
                .joinTableShared,
                "join table \(table) is used by " + relationships.joined(separator: " and ")
                    + "; name the others' tables with joinTable:",
                table: table, relationships: relationships)
        }

        /// An attribute's default value cannot be written as SQL for its column; `reason`
        /// says why, without the value.
        public static func unstorableDefault(entity: String, attribute: String, reason: String) -> Problem {
            Problem(
                .unstorableDefault,
                "\(entity).\(attribute): the default value cannot be stored: \(reason)",
                entity: entity, attribute: attribute)
        }

        /// A table name, or a column name when `column` is given, is longer than
        /// PostgreSQL's 63 bytes (PostgreSQL would cut it, and the schema check would not
        /// find it); `entity` is the entity, or for a join table the relationship pair.
        public static func nameTooLong(entity: String, table: String, column: String? = nil) -> Problem {
            Problem(
                .nameTooLong,
                "\(entity): " + (column.map { "column \(table).\($0)" } ?? "table \(table)")
                    + " has a name longer than PostgreSQL's 63 bytes; declare a shorter one",
                entity: entity, column: column, table: table)
        }
    }

    /// Every problem found.
    public let problems: [Problem]

    /// What went wrong, broadly: `invalidModel`.
    public var code: Code { .invalidModel }

    /// All problems, one per line.
    public var message: String {
        "the model is invalid:\n" + problems.map { "- \($0)" }.joined(separator: "\n")
    }

    /// The problems' codes, for `debugDescription`.
    package var contextFields: [ErrorContextField?] { [.names("problems", problems.map(\.code))] }
}
