import Testing

@testable import PGDataKit

/// Every public error type is a struct with an extensible code and describes itself one
/// way (`DescribedError`): the description is a message without values, the debug
/// description adds the code and every context field, values included.
@Suite("Error codes and descriptions, without a server")
struct ErrorCodeTests {
    /// Each type's codes, by name, as callers see them.
    static let codes: [(type: String, names: [String])] = [
        (
            "ManagedObjectError",
            names([
                ManagedObjectError.Code.unknownKey, .typeMismatch, .objectNotFound, .objectDeleted, .unknownEntity,
                .invalidStoredValue, .deleteDenied, .wrongContext, .equivalentKeys,
            ])
        ),
        (
            "ImportError",
            names([
                ImportError.Code.missingKey, .typeMismatch, .unknownKey, .notUniqueKey, .invalidMap,
                .unresolvedRelationship, .deletedInContext, .recordFailed, .unknownMember,
            ])
        ),
        (
            "ManagedObjectControllerError",
            names([
                ManagedObjectControllerError.Code.stopped, .sectionKeyPathNotSorted, .objectOutsideContext, .noObjects,
                .invalidPageSize,
            ])
        ),
        ("ChangeLogError", names([ChangeLogError.Code.unreadableRecord, .notInstalled, .missingPrivilege])),
        ("ChangeListenerError", names([ChangeListenerError.Code.notificationsNotDelivered])),
        (
            "HistoryError",
            names([
                HistoryError.Code.malformedToken, .historyExpired, .tokenAhead, .readerNotRegistered, .invalidReaderName,
                .recordWithoutToken,
            ])
        ),
        ("ChildContextError", names([ChildContextError.Code.unsupported, .objectGoneFromParent])),
        ("SnapshotError", names([SnapshotError.Code.lost, .readCommitted])),
        (
            "PostgresValueError",
            names([
                PostgresValueError.Code.unexpectedNull, .invalidText, .outOfRange, .containsNUL, .noSuchColumn,
                .unencodable,
            ])
        ),
        (
            "EmbeddedPostgresError",
            names([
                EmbeddedPostgresError.Code.binariesNotFound, .noUnprivilegedUser, .commandFailed, .fileSystem,
                .notAServerDirectory, .alreadyRunning, .oldProcessesRemain, .portInUse, .cannotRestart,
            ])
        ),
        (
            "SaveOutcomeUnknownError",
            names([SaveOutcomeUnknownError.Code.serverUnreachable, .stillInProgress, .statusUnavailable])
        ),
        ("ConnectionPoolError", names([ConnectionPoolError.Code.timedOut, .closed])),
        (
            "MigrationError",
            names([
                MigrationError.Code.unreadableDirectory, .invalidFileName, .duplicateVersion, .checksumMismatch,
                .migrationFailed, .transactionControl, .missingPrivilege, .transactionPooledConnection,
            ])
        ),
        (
            "PostgresError.ConnectionFailureReason",
            names([
                PostgresError.ConnectionFailureReason.hostNotFound, .connectionRefused, .authenticationFailed,
                .databaseDoesNotExist, .timeout, .other,
            ])
        ),
    ]

    /// The names of distinct codes (a duplicate collapses in the set and is caught by
    /// the count).
    static func names<Code: Hashable & CustomStringConvertible>(_ codes: [Code]) -> [String] {
        Set(codes).count == codes.count ? codes.map(\.description) : []
    }

    @Test(arguments: codes.map(\.type))
    func codesAreDistinctAndNamed(_ type: String) throws {
        let names = try #require(Self.codes.first { $0.type == type }?.names)
        #expect(!names.isEmpty, "two codes of \(type) are equal")
        #expect(Set(names).count == names.count, "two codes of \(type) share a name")
        #expect(names.allSatisfy { !$0.isEmpty && !$0.contains(" ") }, "\(names)")
    }

    /// One error of every code of every type: each describes itself with its message and
    /// names itself and its code in `debugDescription`.
    static let samples: [any DescribedError & Sendable] = {
        let id = ObjectID(entityName: "User", primaryKey: 42)
        let token = HistoryToken(xmax: 50, running: [], floor: nil)
        let later = HistoryToken(xmax: 90, running: [], floor: nil)
        let lost = PostgresError(kind: .connectionLost, message: "gone", statement: "COMMIT")
        let samples: [any DescribedError & Sendable] = [
            ManagedObjectError.unknownKey(entity: "User", key: "nickname"),
            ManagedObjectError.typeMismatch(entity: "User", key: "age", expected: "Int", actual: "String"),
            ManagedObjectError.objectNotFound(id),
            ManagedObjectError.objectDeleted(id),
            ManagedObjectError.unknownEntity("Ghost"),
            ManagedObjectError.invalidStoredValue(entity: "User", key: "age", primaryKey: 42, reason: "NULL"),
            ManagedObjectError.deleteDenied(entity: "User", relationship: "posts", objectID: id, relatedCount: 2),
            ManagedObjectError.wrongContext(id),
            ManagedObjectError.equivalentKeys(entity: "User", key: "userID"),
            ImportError.missingKey(recordIndex: 3, key: "UserID", entity: "User", attribute: "userID"),
            ImportError.typeMismatch(
                recordIndex: 3, key: "Age", entity: "User", attribute: "age", expected: "Int", actual: "a string"),
            ImportError.unknownKey(entity: "User", key: "nickname"),
            ImportError.notUniqueKey(entity: "User", attribute: "name"),
            ImportError.invalidMap(entity: "User", key: "posts", reason: "a to-many relationship"),
            ImportError.unresolvedRelationship(recordIndex: 3, key: "UserID", entity: "Post", relationship: "user"),
            ImportError.deletedInContext(recordIndex: 3, key: "UserID", entity: "User"),
            ImportError.recordFailed(recordIndex: 3, underlying: lost),
            ImportError.unknownMember(recordIndex: 3, key: "nickname", entity: "User"),
            ManagedObjectControllerError.stopped,
            ManagedObjectControllerError.sectionKeyPathNotSorted(sectionNameKeyPath: "age", firstSortKey: "name"),
            ManagedObjectControllerError.objectOutsideContext(id),
            ManagedObjectControllerError.noObjects,
            ManagedObjectControllerError.invalidPageSize(0),
            ChangeLogError.unreadableRecord(id: 7, reason: "not JSON"),
            ChangeLogError.notInstalled(table: "pgdatakit_changes"),
            ChangeLogError.missingPrivilege(["SELECT on pgdatakit_changes"]),
            ChangeListenerError.notificationsNotDelivered(endpoint: "app@pooler:6432/shop", waited: .seconds(2)),
            HistoryError.malformedToken(reason: "too short"),
            HistoryError.historyExpired(token: token, oldestAvailable: later),
            HistoryError.tokenAhead(token: later, current: token),
            HistoryError.readerNotRegistered(name: "search"),
            HistoryError.invalidReaderName(reason: "empty"),
            HistoryError.recordWithoutToken(recordID: 7),
            ChildContextError.unsupported(call: "deleteAll", advice: "delete in the parent"),
            ChildContextError.objectGoneFromParent(id, call: "save()"),
            SnapshotError.lost(context: "main", underlying: lost),
            SnapshotError.readCommitted(context: "import"),
            PostgresValueError(code: .unexpectedNull, swiftType: "String", column: "name", row: 0),
            PostgresValueError(code: .invalidText, swiftType: "Int", column: "age", row: 1, text: "forty"),
            PostgresValueError(code: .outOfRange, swiftType: "Int8", column: "age"),
            PostgresValueError(code: .containsNUL, swiftType: "String"),
            PostgresValueError(code: .noSuchColumn, swiftType: "Int", column: "nothing"),
            PostgresValueError(code: .unencodable, swiftType: "Date", reason: "not a finite date"),
            EmbeddedPostgresError.binariesNotFound(searched: ["/usr/lib/postgresql/*/bin"]),
            EmbeddedPostgresError.noUnprivilegedUser("postgres"),
            EmbeddedPostgresError.commandFailed(command: "initdb", status: 1, output: "boom"),
            EmbeddedPostgresError.fileSystem("mkdtemp: no space"),
            EmbeddedPostgresError.notAServerDirectory("/tmp/x"),
            EmbeddedPostgresError.alreadyRunning(directory: "/tmp/x"),
            EmbeddedPostgresError.oldProcessesRemain(directory: "/tmp/x", pids: [12, 13]),
            EmbeddedPostgresError.portInUse(5432),
            EmbeddedPostgresError.cannotRestart(directory: "/tmp/x", log: "PANIC"),
            SaveOutcomeUnknownError(transactionID: 9, code: .serverUnreachable, commitError: lost),
            SaveOutcomeUnknownError(transactionID: 9, code: .stillInProgress, commitError: lost),
            SaveOutcomeUnknownError(transactionID: 9, code: .statusUnavailable, commitError: lost),
            ConnectionPoolError.timedOut(waited: .seconds(5), maximumConnections: 10),
            ConnectionPoolError.closed,
            MigrationError.unreadableDirectory(path: "db", message: "no such folder"),
            MigrationError.invalidFileName("add.sql"),
            MigrationError.duplicateVersion(2, files: ["0002_a.sql", "0002_b.sql"]),
            MigrationError.checksumMismatch(version: 1, name: "create", recorded: "abc", current: "def"),
            MigrationError.migrationFailed(version: 2, name: "add", underlying: lost),
            MigrationError.transactionControl(version: 2, name: "add", command: "COMMIT"),
            MigrationError.missingPrivilege(
                role: "app", privileges: ["CREATE on schema public"], neededFor: "apply migration 2 (add)",
                underlying: nil),
            MigrationError.transactionPooledConnection(endpoint: "app@pooler:6432/shop"),
        ]
        return samples
    }()

    @Test func everyCodeHasASampleThatDescribesItself() {
        let sampled = Set(Self.samples.map { "\(type(of: $0)).\($0.code)" })
        for (type, names) in Self.codes where !type.contains(".") {
            for name in names {
                #expect(sampled.contains("\(type).\(name)"), "no sample of \(type).\(name)")
            }
        }
        for error in Self.samples {
            #expect(!error.message.isEmpty)
            #expect(error.description == error.message)
            #expect(String(reflecting: error).hasPrefix("\(type(of: error)).\(error.code): \(error.message)"))
        }
    }

    /// The description never shows a value (personal data); `debugDescription` does.
    @Test func descriptionsRedactValuesThatDebugDescriptionsShow() {
        let mismatch = ImportError.typeMismatch(
            recordIndex: 4, key: "Email", entity: "User", attribute: "age", expected: "Int", actual: "a string",
            value: "\"ann@example.com\"")
        #expect(mismatch.description == "record 4: \"Email\" is a string, but User.age expects Int")
        #expect(!"\(mismatch)".contains("ann@example.com"))
        #expect(String(reflecting: mismatch).contains("ann@example.com"))
        #expect(String(reflecting: mismatch).contains("recordIndex: 4"))

        let invalid = PostgresValueError(code: .invalidText, swiftType: "Int", column: "age", row: 1, text: "secret-42")
        #expect(!invalid.description.contains("secret-42"))
        #expect(invalid.debugDescription.contains("text: \"secret-42\""))

        // An underlying error appears by its description in the message, by its debug
        // description (with the bound parameters) in the debug description.
        var commit = PostgresError(kind: .connectionLost, message: "gone", statement: "COMMIT")
        commit.parameterDescriptions = ["'ann@example.com'"]
        let failed = ImportError.recordFailed(recordIndex: 2, underlying: commit)
        #expect(!failed.description.contains("ann@example.com"))
        #expect(failed.debugDescription.contains("ann@example.com"))

        // Long values are cut.
        let long = PostgresValueError(code: .invalidText, swiftType: "Int", text: String(repeating: "x", count: 500))
        #expect(long.debugDescription.count < long.description.count + 200)
    }

    /// A `switch` over a code needs `default:` — codes are not an enum, so a later
    /// version may add one without breaking this caller.
    @Test func aSwitchOverACodeHasADefault() {
        func advice(for error: any Error) -> String {
            guard let error = error as? ManagedObjectError else { return "unknown" }
            switch error.code {
            case .typeMismatch: return "convert \(error.key ?? "") to \(error.expected ?? "")"
            case .objectDeleted, .objectNotFound: return "fetch again"
            default: return "report: \(error)"
            }
        }
        #expect(advice(for: ManagedObjectError.objectDeleted(ObjectID(entityName: "User", primaryKey: 1))) == "fetch again")
        #expect(
            advice(for: ManagedObjectError.typeMismatch(entity: "User", key: "age", expected: "Int", actual: "String"))
                == "convert age to Int")
        #expect(advice(for: ManagedObjectError.unknownEntity("Ghost")).hasPrefix("report: Ghost"))
    }

    /// Matching a code in `catch`, as the migration notes show.
    @Test func catchMatchesACode() {
        func load() throws { throw HistoryError.readerNotRegistered(name: "search") }
        do {
            try load()
            Issue.record("expected an error")
        } catch let error as HistoryError where error.code == .readerNotRegistered {
            #expect(error.readerName == "search")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
