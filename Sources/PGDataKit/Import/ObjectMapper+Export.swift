import Foundation

/// How exported records lay out dotted remote key paths.
public enum ExportStyle: Sendable, Equatable {
    /// `"author.id"` becomes `{"author": {"id": …}}`: the shape the maps read.
    case nested
    /// `"author.id"` stays one member named `author.id`.
    case flat
}

extension ObjectMapper {
    /// The records of objects, written with the same maps the import reads (Vokoder's
    /// `dictionaryRepresentationOfObject`): attribute values converted back (dates in the
    /// map's format, `Data` as base64, `UUID` as lowercase text, `nil` as `null`),
    /// relationship maps as the related object's key. Importing the result gives the
    /// same values back.
    ///
    /// To-one relationships of the objects are loaded with one query per relationship.
    /// `afterExport`, when set, is called with each object and its record. Call it on
    /// the objects' context's queue.
    ///
    /// For example:
    ///
    /// ```swift
    /// let records = try mapper.export(try Post.fetchAll(in: context))
    /// let data = try JSONEncoder().encode(records)
    /// ```
    ///
    /// - Throws: `ImportError.unknownKey` / `.invalidMap` when the mapper does not fit the
    ///   model, `PostgresError` when loading related objects fails, what `afterExport`
    ///   throws.
    public func export(_ objects: [Object], style: ExportStyle = .nested) throws -> [JSONValue] {
        guard let context = objects.first?.managedObjectContext else {
            return try objects.map { try export($0, style: style) }
        }
        context.assertOnQueue()
        let entity = try context.entityDescription(for: Object.self)
        let compiled = try CompiledMapper(self, entity: entity, model: context.coordinator.model)
        let relationships = compiled.links.map(\.relationship.name)
        let sameContext = objects.filter { $0.managedObjectContext === context }
        if !relationships.isEmpty { try context.prefetch(relationships, for: sameContext, entity: entity) }
        let formatters = DateFormatters()
        return try objects.map { try finished(compiled.export($0, style: style, formatters: formatters), of: $0) }
    }

    /// The record of one object; see `export(_:style:)` for many.
    ///
    /// - Throws: `ImportError.unknownKey` / `.invalidMap`, what `afterExport` throws.
    public func export(_ object: Object, style: ExportStyle = .nested) throws -> JSONValue {
        let model = object.managedObjectContext?.coordinator.model
        let entity = model?.entity(for: Object.self) ?? object.entity
        let compiled = try CompiledMapper(self, entity: entity, model: model ?? Model(entities: [Object.self]))
        return try finished(compiled.export(object, style: style, formatters: DateFormatters()), of: object)
    }

    /// An object's exported record after `afterExport`, when set, had its say.
    private func finished(_ record: JSONValue, of object: Object) throws -> JSONValue {
        guard let afterExport, case .object(var members) = record else { return record }
        try afterExport(object, &members)
        return .object(members)
    }
}

extension MappableModel {
    /// The object's record through its entity's `objectMapper`.
    ///
    /// - Throws: `ImportError.unknownKey` / `.invalidMap`, what the mapper's
    ///   `afterExport` throws.
    public func exportRecord(style: ExportStyle = .nested) throws -> JSONValue {
        try Self.objectMapper.export(self, style: style)
    }
}

extension CompiledMapper {
    /// One object's record.
    func export(_ object: ManagedObject, style: ExportStyle, formatters: DateFormatters) -> JSONValue {
        object.prepareStorage()
        var record: [String: JSONValue] = [:]
        for map in attributeMaps {
            let value = map.conversion.recordValue(object.storage.value(at: map.attribute.index), formatters: formatters)
            Self.put(value, omitted: exportOmitsNil && value.isNull, at: map.paths[0], into: &record, style: style)
        }
        for (link, conversion) in linkMaps {
            let related = object.relatedObjects(at: link.relationship.index).first
            let value = related.map { related -> JSONValue in
                related.prepareStorage()
                return conversion.recordValue(related.storage.value(at: link.destinationKey.index), formatters: formatters)
            } ?? .null
            Self.put(value, omitted: exportOmitsNil && value.isNull, at: link.paths[0], into: &record, style: style)
        }
        return .object(record)
    }

    /// Puts a value at a key path of a record, creating nested objects (or one flat
    /// member). An `omitted` value (a `nil` left out of the export) is not put, but the
    /// nested objects above it are still created, as Vokoder's hierarchical export does:
    /// the record of a post without author is `{"author": {}}`.
    private static func put(
        _ value: JSONValue, omitted: Bool, at path: RemoteKeyPath, into record: inout [String: JSONValue], style: ExportStyle
    ) {
        guard style == .nested, path.components.count > 1 else {
            if !omitted { record[path.description] = value }
            return
        }
        func insert(_ components: ArraySlice<String>, into members: inout [String: JSONValue]) {
            guard let first = components.first else { return }
            if components.count == 1 {
                if !omitted { members[first] = value }
                return
            }
            var nested: [String: JSONValue] = [:]
            if case .object(let existing) = members[first] { nested = existing }
            insert(components.dropFirst(), into: &nested)
            members[first] = .object(nested)
        }
        insert(path.components[...], into: &record)
    }
}
