@_exported import ArgumentParser
@_exported import PGDataKit

/// Your program's model, as the commands of `PGDataKitCommands` see it: embed
/// `MigrateCommand`, `SchemaCommand` and `ImportCommand` in your executable with your entities, the way
/// Vapor's `migrate` command lives in the app binary.
///
/// For example:
///
/// ```swift
/// enum AppModel: CommandModel {
///     static let entities: [ManagedObject.Type] = [User.self, Post.self]
/// }
/// // subcommands: [MigrateCommand<AppModel>.self, SchemaCommand<AppModel>.self,
/// //               ImportCommand<AppModel>.self]
/// ```
public protocol CommandModel {
    /// The entities: the `ManagedObject` subclasses of the model.
    static var entities: [ManagedObject.Type] { get }
}
