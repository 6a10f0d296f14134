import ArgumentParser
import Foundation
import PGDataKit

/// How the import command maps records to objects, from flags or a mapping file.
///
/// A mapping file is a JSON object; every member is optional:
///
/// ```json
/// {
///   "entity": "posts",
///   "maps": { "id": "postID", "headline": "title" },
///   "links": { "author.id": "user" },
///   "onlyMapped": true,
///   "parseNumbers": false,
///   "keepOnNull": false
/// }
/// ```
///
/// Flags add to the file's maps and links (a flag for the same remote key wins) and
/// turn its switches on.
struct MappingOptions: ParsableArguments {
    @Option(
        name: .customLong("map"),
        help: ArgumentHelp("Read an attribute from a key path of the records (repeatable).", valueName: "REMOTE=ATTRIBUTE"))
    var maps: [String] = []

    @Option(
        name: .customLong("link"),
        help: ArgumentHelp(
            "A key path holding the unique key of a related object, for a to-one relationship (repeatable).",
            valueName: "REMOTE=RELATIONSHIP"))
    var links: [String] = []

    @Option(name: .customLong("mapping"), help: ArgumentHelp("A JSON mapping file (see above).", valueName: "FILE"))
    var mappingFile: String?

    @Flag(help: "Map only what --map and --link name (no maps by attribute name).")
    var onlyMapped = false

    @Flag(help: "Read numbers written as strings (\"42\").")
    var parseNumbers = false

    @Flag(help: "A null keeps the stored value instead of clearing it.")
    var keepOnNull = false

    /// The mapping: the file's, then the flags.
    func resolve() throws -> ImportMapping {
        var mapping = try mappingFile.map(ImportMapping.init(file:)) ?? ImportMapping()
        for map in maps { ImportMapping.add(try Self.pair(map, flag: "--map"), to: &mapping.maps) }
        for link in links { ImportMapping.add(try Self.pair(link, flag: "--link"), to: &mapping.links) }
        mapping.onlyMapped = mapping.onlyMapped || onlyMapped
        mapping.parseNumbers = mapping.parseNumbers || parseNumbers
        mapping.keepOnNull = mapping.keepOnNull || keepOnNull
        return mapping
    }

    private static func pair(_ text: String, flag: String) throws -> (String, String) {
        let parts = text.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw ValidationError("\(flag) takes REMOTE=NAME, as in \(flag) id=userID (got \"\(text)\")")
        }
        return (parts[0], parts[1])
    }
}

/// A resolved mapping, ready to become an `ObjectMapper`.
struct ImportMapping {
    var entity: String?
    /// Remote key path → attribute, in the order given.
    var maps: [(remote: String, name: String)] = []
    /// Remote key path → to-one relationship.
    var links: [(remote: String, name: String)] = []
    var onlyMapped = false
    var parseNumbers = false
    var keepOnNull = false

    init() {}

    /// Reads a mapping file; unknown members are refused (a misspelt one would
    /// otherwise be ignored without a word).
    init(file path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("--mapping \(path): the file cannot be read")
        }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: data), case .object(let members) = value else {
            throw ValidationError("--mapping \(path): not a JSON object")
        }
        func fail(_ reason: String) -> ValidationError { ValidationError("--mapping \(path): \(reason)") }
        for (key, member) in members.sorted(by: { $0.key < $1.key }) {
            switch (key, member) {
            case ("entity", .string(let name)): entity = name
            case ("maps", .object(let pairs)), ("links", .object(let pairs)):
                for (remote, name) in pairs.sorted(by: { $0.key < $1.key }) {
                    guard case .string(let name) = name, !remote.isEmpty, !name.isEmpty else {
                        throw fail("\"\(key)\" maps remote key paths to names (strings)")
                    }
                    if key == "maps" { Self.add((remote, name), to: &maps) } else { Self.add((remote, name), to: &links) }
                }
            case ("onlyMapped", .bool(let flag)): onlyMapped = flag
            case ("parseNumbers", .bool(let flag)): parseNumbers = flag
            case ("keepOnNull", .bool(let flag)): keepOnNull = flag
            case ("entity", _), ("maps", _), ("links", _), ("onlyMapped", _), ("parseNumbers", _), ("keepOnNull", _):
                throw fail("\"\(key)\" has the wrong type")
            default:
                throw fail("unknown member \"\(key)\" (known: entity, maps, links, onlyMapped, parseNumbers, keepOnNull)")
            }
        }
    }

    /// Adds a pair; a later pair for the same remote key path replaces the earlier one.
    static func add(_ pair: (String, String), to list: inout [(remote: String, name: String)]) {
        list.removeAll { $0.remote == pair.0 }
        list.append((pair.0, pair.1))
    }

    /// The mapper for `entity`: matched on its single-attribute unique key, explicit
    /// maps and links, and maps by name for the other attributes unless `onlyMapped`.
    ///
    /// - Throws: `ValidationError` when the entity has no single-attribute unique key or
    ///   a link names no to-one relationship to an entity with one (an unknown
    ///   attribute is reported by the import as `ImportError.unknownKey`).
    func mapper<Object: ManagedObject>(for type: Object.Type, entity: EntityDescription, model: Model) throws
        -> ObjectMapper<Object>
    {
        guard let key = Self.uniqueKey(of: entity) else {
            throw ValidationError("\(entity.name) has no unique key of one attribute to match records on")
        }
        var objectMaps = maps.map { ObjectMap<Object>($0.remote, to: $0.name) }
        for link in links {
            guard let relationship = entity.relationship(named: link.name), !relationship.isToMany else {
                throw ValidationError("--link \(link.remote)=\(link.name): \(entity.name) has no to-one relationship \"\(link.name)\"")
            }
            guard let destination = model.entity(for: relationship.destinationType),
                let destinationKey = Self.uniqueKey(of: destination)
            else {
                throw ValidationError("--link \(link.remote)=\(link.name): the related entity has no unique key of one attribute")
            }
            objectMaps.append(.relationship(link.remote, to: link.name, matching: destinationKey))
        }
        return ObjectMapper<Object>(
            uniqueKey: key, maps: objectMaps, mapsOtherAttributes: !onlyMapped, ignoresNullValueOverwrites: keepOnNull,
            parsesNumbersFromStrings: parseNumbers)
    }

    private static func uniqueKey(of entity: EntityDescription) -> String? {
        entity.uniqueKeys.first { $0.count == 1 }?.first
    }
}
