/// One object's attribute values (or its committed ones): a run of values in a
/// `ValueBlock`, which may hold the runs of other objects too. A fetch decodes its rows
/// into shared blocks (`ValueBlockFiller`), so a fetched object costs no allocation of its
/// own for its values; a value set while the block is shared — with the object's snapshot,
/// another object, anything — first copies the run into a block of its own, as an array
/// copies on write. Reads and writes are by attribute index, `0..<count`.
///
/// Owned by `ObjectStorage` (values and snapshot) and the undo checkpoints; the unsafe
/// code of the blocks lives here and in `ValueBlock`, each use with its reason.
///
/// Across threads a run behaves as an array's storage does: a block is read from any
/// context's queue (an entity's default run, `EntityDescription.defaultValueRun`, is in
/// every new object of every context; a parent's runs reach its children), and written in
/// place only by a run that holds the block alone — its reference count (atomic) says
/// so — or by the one object storage that holds its run alone (`ObjectStorage`'s
/// exclusive values, in a context's `ValueArena`: no other `AttributeValues` refers to
/// that run, and the other runs of the block are other memory), so no write meets
/// another thread's read. Values are appended only by what makes the block (a copy, a
/// fetch's filler on the fetch's own queue, a context's arena on the context's queue:
/// appends go past every run other threads hold).
@usableFromInline
struct AttributeValues {
    /// The block holding the run; `nil` for no values.
    @usableFromInline var block: ValueBlock?
    /// Where the run starts in the block.
    @usableFromInline var start: Int32
    /// The number of values.
    @usableFromInline var length: Int32

    /// No values.
    @usableFromInline init() {
        block = nil
        start = 0
        length = 0
    }

    /// The values of an array, in a block of their own (or none when it is empty).
    init(_ values: [StoredValue]) {
        guard !values.isEmpty else {
            self.init()
            return
        }
        let block = ValueBlock.make(capacity: values.count)
        for value in values { block.append(value) }
        self.init(block: block, start: 0, count: values.count)
    }

    /// The run of `count` values at `start` in `block` (`ValueBlockFiller` made them).
    init(block: ValueBlock, start: Int, count: Int) {
        self.block = block
        // (A block holds at most `Int32.max` values: `ValueBlock.make(capacity:)`.)
        self.start = Int32(truncatingIfNeeded: start)
        self.length = Int32(truncatingIfNeeded: count)
    }

    // Unsafe: the buffer handed out covers exactly the run, valid for the call (below).
    /// Hands the values to `body` as a buffer, valid only inside it (a read of many values
    /// without a check per value).
    @inlinable
    func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<StoredValue>) throws -> R) rethrows -> R {
        // Unsafe: no values, an empty buffer (no address to read).
        guard let block else { return try body(UnsafeBufferPointer(start: nil, count: 0)) }
        // Unsafe: the run `start..<start + length` is initialized (made by `append`) and
        // stays so while `block` is held, which this call does; the buffer covers the run.
        return try block.withUnsafeMutablePointerToElements { elements in
            try body(UnsafeBufferPointer(start: elements + Int(start), count: Int(length)))
        }
    }

    /// Makes the run the only user of its block, copying it into a block of its own when
    /// the block is shared (before a write).
    @usableFromInline
    mutating func makeUnique() {
        guard !isKnownUniquelyReferenced(&block), block != nil else { return }
        self = copiedAlone()
    }

    /// Whether this run holds its block alone: no other run of any object, and no copy of
    /// this one, refers to it (so no one else reads the values a write changes).
    @inline(__always)
    mutating func holdsBlockAlone() -> Bool {
        block == nil || isKnownUniquelyReferenced(&block)
    }

    /// The same values in a block of their own (an allocation; for a run that no
    /// `ValueArena` can take).
    func copiedAlone() -> AttributeValues {
        guard let block else { return AttributeValues() }
        let copy = ValueBlock.make(capacity: Int(length))
        // Unsafe: the run is initialized and `block` is held across the read (as above).
        block.withUnsafeMutablePointerToElements { elements in
            for index in 0..<Int(length) { copy.append(elements[Int(start) + index]) }
        }
        return AttributeValues(block: copy, start: 0, count: Int(length))
    }

    /// Sets value `position` where it is, without copying the run first, even when the
    /// block holds other runs: for an owner that holds this run alone (`ObjectStorage`
    /// with its values exclusive: no other `AttributeValues` refers to the run). The other
    /// runs of the block are other memory, so no reader of theirs, on any thread, sees
    /// the write.
    ///
    /// - Precondition: `position` is in `0..<count` (a misuse: slots come from the model).
    @inline(__always)
    mutating func setHeldAlone(_ value: consuming StoredValue, at position: Int) {
        guard let block, position >= 0, position < Int(length) else {
            preconditionFailure("no attribute value at position \(position) of \(length)")
        }
        // Unsafe: `position` is in the run (checked above), which is initialized while
        // `block` is held; the caller holds the run alone, so the assignment (which
        // releases the old value) is seen by no other run.
        block.withUnsafeMutablePointerToElements { $0[Int(start) + position] = value }
    }
}

extension AttributeValues: RandomAccessCollection, MutableCollection {
    /// Always 0.
    @inlinable var startIndex: Int { 0 }
    /// The number of values.
    @inlinable var endIndex: Int { Int(length) }
    /// The number of values.
    @inlinable var count: Int { Int(length) }

    /// The value of attribute `position`.
    ///
    /// - Precondition: `position` is in `0..<count` (a misuse: slots come from the model).
    @inlinable
    subscript(position: Int) -> StoredValue {
        get {
            guard let block, position >= 0, position < Int(length) else {
                preconditionFailure("no attribute value at position \(position) of \(length)")
            }
            // Unsafe: `position` is in the run (checked above), which is initialized while
            // `block` is held.
            return block.withUnsafeMutablePointerToElements { $0[Int(start) + position] }
        }
        set {
            guard position >= 0, position < Int(length) else {
                preconditionFailure("no attribute value at position \(position) of \(length)")
            }
            makeUnique()
            guard let block else { preconditionFailure("a run of \(length) values without a block") }
            // Unsafe: as the getter; the block is this run's alone (`makeUnique`), so the
            // assignment (which releases the old value) is seen by no other object.
            block.withUnsafeMutablePointerToElements { $0[Int(start) + position] = newValue }
        }
    }
}

extension AttributeValues: Equatable {
    /// Whether both hold equal values, attribute by attribute.
    @usableFromInline
    static func == (lhs: AttributeValues, rhs: AttributeValues) -> Bool {
        lhs.elementsEqual(rhs)
    }
}

/// A block of attribute values: `ManagedBuffer` storage for the runs of one or more
/// objects (`AttributeValues`), with the number of values initialized so far in its
/// header; values are only appended, and all are released with the block.
@usableFromInline
final class ValueBlock: ManagedBuffer<ValueBlock.Header, StoredValue> {
    /// How much of the block is in use.
    @usableFromInline
    struct Header {
        /// Values initialized, from the start.
        var count: Int
        /// Values the block has room for.
        let capacity: Int
    }

    /// An empty block with room for `capacity` values (at least one).
    static func make(capacity: Int) -> ValueBlock {
        let capacity = max(1, min(capacity, Int(Int32.max)))
        let buffer = ValueBlock.create(minimumCapacity: capacity) { _ in Header(count: 0, capacity: capacity) }
        // Unsafe: `create` called on `ValueBlock` makes a `ValueBlock` (the class it is
        // called on); its declared type is the superclass.
        return unsafeDowncast(buffer, to: ValueBlock.self)
    }

    // (Through the header's pointer, not `header`: the stored property is checked for
    // exclusive access at run time, ~30 instructions a read.)

    /// The number of values initialized.
    var count: Int {
        // Unsafe: the header is initialized by `create` and read only inside the call.
        withUnsafeMutablePointerToHeader { $0.pointee.count }
    }

    /// Room left for values.
    var room: Int {
        // Unsafe: as `count`.
        withUnsafeMutablePointerToHeader { $0.pointee.capacity - $0.pointee.count }
    }

    /// Initializes the next value.
    ///
    /// - Precondition: the block has room (the fillers reserve it first).
    func append(_ value: StoredValue) {
        // Unsafe: `count < capacity` is checked, so the element is in the allocation and
        // not initialized yet; the count rises with it.
        withUnsafeMutablePointers { header, elements in
            precondition(header.pointee.count < header.pointee.capacity, "a value block is full")
            (elements + header.pointee.count).initialize(to: value)
            header.pointee.count += 1
        }
    }

    /// Destroys the values that hold a reference; the others (numbers, dates, `NULL`)
    /// need nothing done, and a block holds thousands of them: the run-time's destruction
    /// of every element, case by case, took about 50 instructions a value (callgrind).
    deinit {
        // Unsafe: exactly the first `count` values are initialized (`append`); each is
        // destroyed at most once, and the memory goes with the block.
        withUnsafeMutablePointers { header, elements in
            for index in 0..<header.pointee.count where elements[index].holdsReference {
                // Moved out and destroyed here, as a `StoredValue` (a deinitialize goes
                // through the run-time's value witness: about twice the instructions).
                _ = (elements + index).move()
            }
        }
    }
}

/// Fills shared `ValueBlock`s with the values of many objects, a run per object (a
/// fetch's rows): one block per `rows` objects rather than an array per object.
///
/// A block kept by one object keeps the other runs in it (values of objects since
/// released or written to): at most `rows` runs, and at most about 4 KiB.
struct ValueBlockFiller {
    /// The block being filled.
    private var block: ValueBlock?
    /// Values per run (the entity's attributes).
    private let runLength: Int
    /// Runs per block.
    private let rows: Int

    /// A filler of runs of `runLength` values for up to `expectedRuns` objects.
    init(runLength: Int, expectedRuns: Int) {
        self.runLength = runLength
        // (~4 KiB a block: an object kept alone keeps little else alive.)
        let perBlock = 4096 / max(1, runLength * MemoryLayout<StoredValue>.stride)
        rows = max(1, min(expectedRuns, perBlock, 64))
    }

    /// Decodes one run: `value(index)` for each index `0..<runLength` appended in a
    /// block with room for all of them. A value that throws leaves the ones before it
    /// in the block, unused.
    mutating func run(_ value: (Int) throws -> StoredValue) rethrows -> AttributeValues {
        guard runLength > 0 else { return AttributeValues() }
        let current: ValueBlock
        if let block, block.room >= runLength {
            current = block
        } else {
            current = ValueBlock.make(capacity: runLength * rows)
            block = current
        }
        let start = current.count
        for index in 0..<runLength { current.append(try value(index)) }
        return AttributeValues(block: current, start: start, count: runLength)
    }
}

/// Where a context's objects copy their values on their first write (a written object
/// holds a run of its own, apart from its committed values): runs of any length side by
/// side in shared blocks of about 4 KiB, so the copy costs no allocation of its own — one
/// block for dozens of objects. The object's storage then writes into its run in place
/// (`ObjectStorage`: its values are exclusive), not through the block's reference count,
/// which the other runs in the block raise.
///
/// Used on its context's queue only (`ContextReference.valueArena`). As with a fetch's
/// blocks, a block kept by one object keeps the other runs in it, those of objects since
/// released among them: at most about 4 KiB of values.
final class ValueArena {
    /// The block runs are appended to.
    private var block: ValueBlock?

    /// Values per block (~4 KiB); a longer run gets a block of its own.
    static let blockValues = max(8, 4096 / MemoryLayout<StoredValue>.stride)

    /// An arena with no block yet.
    init() {}

    /// A copy of `run` in the arena's current block (or a new one): a run that no other
    /// `AttributeValues` refers to.
    func copy(_ run: AttributeValues) -> AttributeValues {
        let length = run.count
        guard length > 0 else { return AttributeValues() }
        guard length <= Self.blockValues / 2 else { return run.copiedAlone() }
        let current: ValueBlock
        if let block, block.room >= length {
            current = block
        } else {
            current = ValueBlock.make(capacity: Self.blockValues)
            block = current
        }
        let start = current.count
        // Unsafe: the buffer is read only inside the closure; `append` copies each value.
        run.withUnsafeBufferPointer { values in
            for value in values { current.append(value) }
        }
        return AttributeValues(block: current, start: start, count: length)
    }
}
