import Foundation
import PGDataKit

/// The tests' `Specimen` (`EveryTypeTargetTests.swift`): an attribute of every type.
enum HelperStatus: String, AttributeEnum { case draft, published, archived }
/// The tests' `TicketPriority`.
enum HelperPriority: Int, AttributeEnum { case low = 1, high = 2 }
/// The tests' `TicketSize`.
enum HelperSize: Int16, AttributeEnum { case small = 1, large = 2 }
/// The tests' `TicketAddress`.
struct HelperAddress: Codable, Equatable, AttributeCodable {
    var city: String
    var zip: String
}

/// The tests' specimen, declared again in this process (same entity, table, attributes).
final class HelperSpecimen: ManagedObject {
    override class var entityName: String { "Specimen" }
    override class var tableName: String { "specimens" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var text: String = ""
    @Attribute var optionalText: String?
    @Attribute var int: Int = 0
    @Attribute var int64: Int64 = 0
    @Attribute var int32: Int32 = 0
    @Attribute var int16: Int16 = 0
    @Attribute var double: Double = 0
    @Attribute var float: Float = 0
    @Attribute var decimal: Decimal = 0
    @Attribute var flag: Bool = false
    @Attribute var date: Date = Date(timeIntervalSince1970: 0)
    @Attribute var uuid: UUID?
    @Attribute var data: Data = Data()
    @Attribute var json: JSONValue = .null
    @Attribute var status: HelperStatus = .draft
    @Attribute var priority: HelperPriority?
    @Attribute var size: HelperSize = .small
    @Attribute var address: HelperAddress?
    @Attribute var home: HelperAddress = HelperAddress(city: "", zip: "")
    @Attribute var tags: [String] = []
    @Attribute var scores: [Int]?
    @Attribute var levels: [Int16] = []
    @Attribute var ratios: [Double] = []
    @Attribute var amounts: [Decimal]?
    @Attribute var flags: [Bool] = []
    @Attribute var moments: [Date] = []
    @Attribute var keys: [UUID]?
}

/// Another worker holding every specimen in its main context: prints `specimens <JSON>`
/// (the export of the specimens it holds, in code order) when it starts and after each
/// merge of another process's save — the values as this process's merge decoded them.
func specimenWatch(_ url: String) -> Never {
    let watcher: ContextManager
    do {
        watcher = try ContextManager(configuration: ConnectionConfiguration(url), entities: [HelperSpecimen.self])
    } catch {
        fail("\(error)")
    }
    let main = watcher.mainContext
    let held = HeldSpecimens()
    @Sendable func report() throws {
        if held.specimens.isEmpty { held.specimens = try main.fetchAll(HelperSpecimen.self) }
        let sorted = held.specimens.sorted { $0.code < $1.code }
        let records = try ObjectMapper<HelperSpecimen>(uniqueKey: \.code).export(sorted)
        emit("specimens " + JSONValue.array(records).jsonText)
    }
    watchMainContext(of: watcher, report)
}

/// The specimens the watcher holds; used only on the main context's queue.
final class HeldSpecimens: @unchecked Sendable {
    var specimens: [HelperSpecimen] = []
}
