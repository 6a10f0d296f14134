import Foundation
import Testing

// Not `@testable`: the `catch` patterns below must compile as a program's would, with the
// public API alone (`package` API only where a test looks inside).
import PGDataKit
import PGDataKitPostgres

/// Every public error type is alike (issue 44): a `DescribedError` whose code, backed by
/// an enum, stands as a `catch` pattern (`catch ImportError.Code.missingKey`), and whose
/// description shows no bound value.
@Suite("Errors alike, without a server")
struct ErrorsAlikeTests {
    /// Every public error type of PGDataKit and PGDataKitPostgres, listed by hand (a new
    /// one joins the list: `everyPublicErrorTypeIsListed` finds it in the sources).
    static func errorTypes() -> [Any.Type] {
        [
            PostgresError.self, PostgresValueError.self, ConnectionPoolError.self, EmbeddedPostgresError.self,
            ModelError.self, SchemaMismatchError.self, StoreResetError.self, ChangeLogError.self,
            ChangeListenerError.self, SaveOutcomeUnknownError.self, MigrationError.self, HistoryError.self,
            ChildContextError.self, MergeConflictError.self, ManagedObjectError.self, FetchPredicateError.self,
            FetchRequestError.self, ManagedObjectControllerError.self, ImportError.self, ShutdownError.self,
            ObjectValidationError.self, SnapshotError.self,
        ]
    }

    /// Each listed type describes itself one way and has a code that can match in `catch`.
    @Test func everyPublicErrorTypeIsADescribedError() {
        let types = Self.errorTypes()
        #expect(types.count == 22)
        for type in types {
            #expect(type is any DescribedError.Type, "\(type) is not a DescribedError")
        }
    }

    /// The list holds every `public struct …Error` declared under Sources/PGDataKit and
    /// Sources/PGDataKitPostgres, so a new error type cannot miss the conformance unseen.
    @Test func everyPublicErrorTypeIsListed() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        var declared: Set<String> = []
        for module in ["Sources/PGDataKit", "Sources/PGDataKitPostgres"] {
            let folder = root.appendingPathComponent(module)
            let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
            for case let file as URL in files where file.pathExtension == "swift" {
                let text = try String(contentsOf: file, encoding: .utf8)
                for match in text.matches(of: /public struct ([A-Za-z]+Error)\b/) { declared.insert(String(match.1)) }
            }
        }
        #expect(declared.count >= 20)
        #expect(declared == Set(Self.errorTypes().map { "\($0)" }))
    }

    /// A code stands as a `catch` pattern: it matches its own error type with that code,
    /// not another code, and not an error of another type whose code has the same name.
    @Test func aCodeMatchesItsOwnErrorInCatch() {
        /// An import that fails on its first record.
        func load() throws {
            throw ImportError.missingKey(recordIndex: 3, key: "UserID", entity: "User", attribute: "userID")
        }
        var matched = false
        do {
            try load()
            Issue.record("expected an error")
        } catch ImportError.Code.typeMismatch {
            Issue.record("matched another code")
        } catch ManagedObjectError.Code.unknownKey {
            Issue.record("matched another error type")
        } catch ImportError.Code.missingKey {
            matched = true
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(matched)
    }

    /// `~=` itself: by type and by code; errors that are not PGDataKit's never match.
    @Test func codesMatchByTypeAndCode() {
        let unknownImportKey: any Error = ImportError.unknownKey(entity: "User", key: "nickname")
        let unknownObjectKey: any Error = ManagedObjectError.unknownKey(entity: "User", key: "nickname")
        #expect(ImportError.Code.unknownKey ~= unknownImportKey)
        #expect(!(ImportError.Code.unknownKey ~= unknownObjectKey))
        #expect(ManagedObjectError.Code.unknownKey ~= unknownObjectKey)
        #expect(!(ImportError.Code.missingKey ~= unknownImportKey))
        #expect(!(ImportError.Code.unknownKey ~= CancellationError()))
        // Codes of the same name in two types stay apart.
        let grant: any Error = ChangeLogError.missingPrivilege(["SELECT on pgdatakit_changes"])
        #expect(ChangeLogError.Code.missingPrivilege ~= grant)
        #expect(!(MigrationError.Code.missingPrivilege ~= grant))
        // In a `switch` over an error, too.
        /// Which type's `unknownKey` the error is, by `case` patterns.
        func kind(of error: any Error) -> String {
            switch error {
            case ImportError.Code.unknownKey: return "import"
            case ManagedObjectError.Code.unknownKey: return "object"
            default: return "other"
            }
        }
        #expect(kind(of: unknownImportKey) == "import")
        #expect(kind(of: unknownObjectKey) == "object")
        #expect(kind(of: CancellationError()) == "other")
    }

    /// `PostgresError` matches by its kind (`Code`) and, unbound, by its SQLSTATE.
    @Test func postgresErrorsMatchByKindAndSQLState() {
        /// An insert that meets a unique constraint.
        func insert() throws {
            throw PostgresError(kind: .server, sqlState: .uniqueViolation, message: "duplicate key value")
        }
        var matched = false
        do {
            try insert()
        } catch SQLState.serializationFailure {
            Issue.record("matched another SQLSTATE")
        } catch PostgresError.Code.connectionLost {
            Issue.record("matched another kind")
        } catch SQLState.uniqueViolation {
            matched = true
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(matched)
        let lost: any Error = PostgresError(kind: .connectionLost, message: "gone")
        #expect(PostgresError.Code.connectionLost ~= lost)
        #expect(PostgresError.Kind.connectionLost ~= lost)
        #expect(!(PostgresError.Code.server ~= lost))
        #expect(!(SQLState.uniqueViolation ~= lost))
        #expect(!(SQLState.uniqueViolation ~= ConnectionPoolError.closed))
        #expect(ConnectionPoolError.Code.closed ~= ConnectionPoolError.closed)
    }

    /// The errors that joined `DescribedError` match too; a predicate's codes tell a
    /// string that does not parse from an argument that cannot stand in it.
    @Test func theNewlyAlikeErrorsMatch() {
        /// The code parsing `format` throws, by `catch` patterns; `none` when it parses.
        func code(of format: String, _ arguments: Any?...) -> String {
            do {
                _ = try FetchPredicate(format: format, argumentArray: arguments)
                return "none"
            } catch FetchPredicateError.Code.syntaxError {
                return "syntaxError"
            } catch FetchPredicateError.Code.invalidArgument {
                return "invalidArgument"
            } catch {
                return "\(error)"
            }
        }
        #expect(code(of: "age >= ") == "syntaxError")
        #expect(code(of: "x == %@", UInt64.max) == "invalidArgument")
        #expect(code(of: "age >= 3") == "none")
        let reset: any Error = StoreResetError(connectedDatabase: "app_test", requestedDatabase: "app")
        #expect(StoreResetError.Code.wrongDatabase ~= reset)
        #expect(FetchRequestError.Code.invalidValue ~= FetchRequestError(field: "fetchLimit", message: "is -1"))
        #expect(!(FetchRequestError.Code.invalidValue ~= reset))
    }

    /// Codes are values: equal by case, usable as dictionary keys, named as before.
    @Test func codesAreHashableAndNamed() {
        let counts: [ImportError.Code: Int] = [.missingKey: 1, .typeMismatch: 2]
        #expect(counts[.missingKey] == 1 && counts[.typeMismatch] == 2 && counts[.unknownKey] == nil)
        #expect(ImportError.Code.missingKey == .missingKey && ImportError.Code.missingKey != .typeMismatch)
        #expect("\(ImportError.Code.missingKey)" == "missingKey")
        #expect("\(PostgresError.Code.connectionLost)" == "connectionLost")
        #expect("\(PostgresError.ConnectionFailureReason.hostNotFound)" == "hostNotFound")
        #expect("\(ModelError.Problem.Code.missingInverse)" == "missingInverse")
        #expect("\(SchemaMismatchError.Mismatch.Code.wrongType)" == "wrongType")
    }

    /// Descriptions keep bound values out; debug descriptions name type and code and show
    /// them.
    @Test func descriptionsShowNoBoundValues() {
        var duplicate = PostgresError(
            kind: .server, sqlState: .uniqueViolation, message: "duplicate key value violates unique constraint",
            detail: "Key (email)=(ann@example.com) already exists.", statement: "INSERT INTO users (email) VALUES ($1)")
        duplicate.parameterDescriptions = ["'ann@example.com'"]
        #expect(!duplicate.description.contains("ann@example.com"))
        #expect(duplicate.description.contains("INSERT INTO users (email) VALUES ($1)"))
        #expect(duplicate.debugDescription.hasPrefix("PostgresError.server: \(duplicate.description) ["))
        #expect(duplicate.debugDescription.contains("detail: \"Key (email)=(ann@example.com) already exists.\""))
        #expect(duplicate.debugDescription.contains("parameters: ['ann@example.com']"))

        let mismatch = ImportError.typeMismatch(
            recordIndex: 2, key: "Age", entity: "User", attribute: "age", expected: "Int", actual: "a string",
            value: "\"ann@example.com\"")
        #expect(!mismatch.description.contains("ann@example.com"))
        #expect(mismatch.debugDescription.hasPrefix("ImportError.typeMismatch: \(mismatch.message) ["))
        #expect(mismatch.debugDescription.contains("ann@example.com"))

        // A type that joined keeps its description and gains the debug form.
        let reset = StoreResetError(connectedDatabase: "app_test", requestedDatabase: "app")
        #expect(
            reset.description
                == "resetStore(database: \"app\") refused: the coordinator is connected to \"app_test\"; nothing was deleted")
        #expect(
            reset.debugDescription
                == "StoreResetError.wrongDatabase: \(reset.description) [connectedDatabase: app_test, requestedDatabase: app]")
    }
}
