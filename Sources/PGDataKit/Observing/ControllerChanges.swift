import Foundation

/// What one fetch or one change set did to a controller's `objects`, as index sets that
/// update a list view in one batch (Core Data's fetched-results-controller changes;
/// SQKDataKit's fetched / saved / inserted / deleted index sets).
///
/// Apply a change set to a copy of the old objects like a table view's batch update:
/// remove the `deleted` indexes and the `moved` sources (old indexes), then insert the
/// `inserted` indexes and the `moved` destinations (new indexes) in ascending order; the
/// result is the controller's new `objects`. `updated` lists the new index of every
/// object that was saved and stayed (moved ones included), for reloading their rows.
///
/// For example:
///
/// ```swift
/// controller.onChange = { controller, changes in
///     if changes.isLargeChange { reloadEverything(controller.objects); return }
///     table.delete(changes.deleted); table.insert(changes.inserted)
///     for move in changes.moved { table.move(move.from, to: move.to) }
///     table.reload(changes.updated)
/// }
/// ```
public struct ControllerChanges: Sendable, Equatable {
    /// What caused the change set.
    public enum Kind: Sendable, Equatable {
        /// `performFetch()` replaced the objects: reload everything (`fetched`).
        case fetched
        /// Saves or merges changed objects (also `loadNextPage()` of a paging controller).
        case changed
    }

    /// What caused the change set.
    public var kind: Kind
    /// After a fetch, every index of the new objects.
    public var fetched = IndexSet()
    /// Indexes in the old objects of those that left (deleted, or no longer matching).
    public var deleted = IndexSet()
    /// Indexes in the new objects of those that entered (inserted, or newly matching).
    public var inserted = IndexSet()
    /// Indexes in the new objects of those saved that stayed, moved ones included.
    public var updated = IndexSet()
    /// Objects that stayed and changed place (their sort key changed), from old to new
    /// index, by ascending new index.
    public var moved: [ControllerMove] = []
    /// Indexes in the old sections of the sections that disappeared.
    public var deletedSections = IndexSet()
    /// Indexes in the new sections of the sections that appeared.
    public var insertedSections = IndexSet()
    /// `deleted` as section and item in the old sections.
    public var deletedIndexPaths: [ControllerIndexPath] = []
    /// `inserted` as section and item in the new sections.
    public var insertedIndexPaths: [ControllerIndexPath] = []
    /// `updated` as section and item in the new sections.
    public var updatedIndexPaths: [ControllerIndexPath] = []
    /// `moved` as section and item, old sections to new.
    public var movedIndexPaths: [ControllerIndexPathMove] = []
    /// The IDs of the objects that left, in the order of `deleted`.
    public var deletedObjectIDs: [ObjectID] = []
    /// The IDs of the objects that entered, in the order of `inserted`.
    public var insertedObjectIDs: [ObjectID] = []
    /// The IDs of the objects saved, in the order of `updated`.
    public var updatedObjectIDs: [ObjectID] = []
    /// Whether more objects changed than the controller's `largeChangeThreshold`: a list
    /// view should reload instead of animating each change.
    public var isLargeChange = false
    /// How many objects the controller has after the change.
    public var objectCount = 0

    /// An empty change set of a kind.
    public init(kind: Kind) { self.kind = kind }

    /// Whether nothing changed (never delivered).
    public var isEmpty: Bool {
        kind == .changed && deleted.isEmpty && inserted.isEmpty && updated.isEmpty && moved.isEmpty
            && deletedSections.isEmpty && insertedSections.isEmpty
    }
}

/// An object that changed place: its index in the old objects and in the new ones.
public struct ControllerMove: Sendable, Hashable, CustomStringConvertible {
    /// The index in the old objects.
    public var from: Int
    /// The index in the new objects.
    public var to: Int

    /// Creates a move.
    public init(from: Int, to: Int) {
        self.from = from
        self.to = to
    }

    /// `3→7`.
    public var description: String { "\(from)→\(to)" }
}

/// A place in a sectioned controller: the section and the item in it.
public struct ControllerIndexPath: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The section's index.
    public var section: Int
    /// The object's index in its section.
    public var item: Int

    /// Creates an index path.
    public init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }

    /// Orders by section, then item.
    public static func < (lhs: ControllerIndexPath, rhs: ControllerIndexPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    /// `[1, 4]`.
    public var description: String { "[\(section), \(item)]" }
}

/// A move between index paths, old sections to new.
public struct ControllerIndexPathMove: Sendable, Hashable {
    /// Where the object was.
    public var from: ControllerIndexPath
    /// Where it is now.
    public var to: ControllerIndexPath
}

/// One section of a controller with a `sectionNameKeyPath`: the objects that share a
/// value of that key path, one run of `objects`.
public struct ControllerSection: Sendable, Hashable {
    /// The value of the section key path (its description; `""` for `nil`).
    public var name: String
    /// Where the section's objects are in the controller's `objects`.
    public var range: Range<Int>

    /// How many objects the section has.
    public var numberOfObjects: Int { range.count }
}

extension [ControllerSection] {
    /// The index path of an index into the objects these sections divide.
    func indexPath(of index: Int) -> ControllerIndexPath {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle].range.upperBound <= index { low = middle + 1 } else { high = middle }
        }
        guard low < count else { return ControllerIndexPath(section: 0, item: index) }
        return ControllerIndexPath(section: low, item: index - self[low].range.lowerBound)
    }
}
