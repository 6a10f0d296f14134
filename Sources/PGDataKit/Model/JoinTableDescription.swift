/// Where a many-to-many relationship is stored: a join table with one row per related
/// pair, seen from one side of the relationship (the inverse sees the same table with
/// the columns swapped).
///
/// For example, `Post.tags` ↔ `Tag.posts` by convention:
///
/// ```swift
/// let table = model.entity(named: "Post")?.relationship(named: "tags")?.joinTable
/// print(table?.tableName ?? "")          // posts_tags
/// print(table?.sourceColumn ?? "")       // post_id  (the post's key)
/// print(table?.destinationColumn ?? "")  // tag_id   (the related tag's key)
/// ```
///
/// The table needs both columns as `bigint` and a primary key or unique constraint on
/// the pair (saves insert with `ON CONFLICT DO NOTHING`):
///
/// ```sql
/// CREATE TABLE posts_tags (
///     post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
///     tag_id bigint NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
///     PRIMARY KEY (post_id, tag_id));
/// CREATE INDEX ON posts_tags (tag_id);
/// ```
public struct JoinTableDescription: Sendable, Hashable, CustomStringConvertible {
    /// The join table.
    public let tableName: String
    /// The column holding the keys of the objects that own the relationship.
    public let sourceColumn: String
    /// The column holding the related objects' keys.
    public let destinationColumn: String

    /// The same table seen from the inverse relationship.
    var inverted: JoinTableDescription {
        JoinTableDescription(tableName: tableName, sourceColumn: destinationColumn, destinationColumn: sourceColumn)
    }

    /// `posts_tags(post_id, tag_id)`.
    public var description: String { "\(tableName)(\(sourceColumn), \(destinationColumn))" }
}

/// One join table of a model, with what the schema check and its messages need.
struct ModelJoinTable: Sendable {
    /// The table as the first relationship sees it.
    let table: JoinTableDescription
    /// `Post.tags ↔ Tag.posts`.
    let relationships: String
    /// The entity whose keys `table.sourceColumn` holds, and the other one.
    let sourceEntity: String
    let destinationEntity: String
}
