/// Where a row version was in its table when a transaction read it (PostgreSQL's `ctid`:
/// a block number and an item offset), tagged with the transaction that read it.
///
/// A save that finds every row it updates by location instead of by primary key skips
/// two probes of the primary-key index per row (the lock statement's and the
/// `UPDATE`'s): the location of a row version read in the same repeatable-read
/// transaction is stable, because the version stays visible to that transaction's
/// snapshot and so cannot be pruned and its slot reused. A version the transaction no
/// longer sees (it changed the row itself since) is simply not found, and the save
/// locks by key instead (see `StoreCoordinator.lockRows(of:_:on:)`).
///
/// Packed in 64 bits: the reading transaction's serial (16 bits, never 0; see
/// `ManagedObjectContext.locationSerial`), the block number (32) and the offset (16).
/// `0` is no location.
struct RowLocation: Equatable {
    let packed: UInt64

    /// The serial of the transaction that read the row.
    var serial: UInt16 { UInt16(truncatingIfNeeded: packed >> 48) }

    /// `(block,offset)`, as PostgreSQL writes a `tid`.
    var text: String {
        "(\(UInt32(truncatingIfNeeded: packed >> 16)),\(UInt16(truncatingIfNeeded: packed)))"
    }

    init?(packed: UInt64) {
        guard packed != 0 else { return nil }
        self.packed = packed
    }

    // Unsafe: `bytes` is borrowed for the call (a fetch's `QueryResult.fieldBytes` cell while
    // it holds the result) and read only at indexes below `count`, checked first.
    /// Parses a `tid` as PostgreSQL writes it, `(block,offset)`; `nil` for anything else
    /// (or a serial of 0, which marks no location).
    init?(tid bytes: UnsafeBufferPointer<UInt8>, serial: UInt16) {
        let count = bytes.count
        guard serial != 0, count >= 5, count <= 19, bytes[0] == UInt8(ascii: "("), bytes[count - 1] == UInt8(ascii: ")")
        else { return nil }
        // (At most 10 digits of a 32-bit block number and 5 of a 16-bit offset: 19 bytes.)
        var parts: (block: UInt64, offset: UInt64) = (0, 0)
        var digits = 0
        var index = 1
        while index < count - 1, bytes[index] != UInt8(ascii: ",") {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            parts.block = parts.block &* 10 &+ UInt64(digit)
            digits += 1
            index += 1
        }
        guard digits > 0, index < count - 1, parts.block <= UInt64(UInt32.max) else { return nil }
        index += 1
        let offsetStart = index
        while index < count - 1 {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            parts.offset = parts.offset &* 10 &+ UInt64(digit)
            index += 1
        }
        guard index > offsetStart, parts.offset <= UInt64(UInt16.max) else { return nil }
        packed = UInt64(serial) << 48 | parts.block << 16 | parts.offset
    }

    /// The locations as a `tid[]` in binary, for `StoreCoordinator.anyElement(of:type:)`:
    /// six bytes each, nothing for the server to parse (a save sends thousands).
    static func binaryArray(_ locations: [RowLocation]) -> BinaryArray<TupleID> {
        var array = BinaryArrayBuilder(element: .tid, capacity: locations.count)
        for location in locations {
            array.append(
                block: UInt32(truncatingIfNeeded: location.packed >> 16), offset: UInt16(truncatingIfNeeded: location.packed))
        }
        return BinaryArray(bytes: array.finish())
    }
}
