import Testing

@testable import PGDataKit

@Suite("Row lock sets: ascending keys, each once, in its strongest mode")
struct RowLockSetTests {
    @Test func keysComeOutAscendingOnceWithTheirStrongestMode() {
        var set = RowLockSet()
        #expect(set.isEmpty)
        #expect(set.onlyRow == nil)
        for (key, mode) in [
            (Int64(30), RowLockMode.keyShare), (10, .noKeyUpdate), (20, .keyShare), (10, .keyShare), (30, .update),
            (20, .noKeyUpdate), (-5, .keyShare), (30, .noKeyUpdate),
        ] {
            set.add(key, mode)
        }
        let ordered = set.ordered
        #expect(ordered.keys == [-5, 10, 20, 30])
        #expect(ordered.modes == [RowLockMode.keyShare, .noKeyUpdate, .noKeyUpdate, .update].map(\.rawValue))
        #expect(set.onlyRow == nil)
    }

    @Test func oneRowAddedTwiceIsStillOneRow() {
        var set = RowLockSet()
        set.add(7, .keyShare)
        #expect(set.onlyRow?.key == 7 && set.onlyRow?.mode == .keyShare)
        set.add(7, .noKeyUpdate)
        #expect(set.onlyRow?.key == 7 && set.onlyRow?.mode == .noKeyUpdate)
        #expect(set.ordered.keys == [7])
        set.add(8, .update)
        #expect(set.onlyRow == nil)
        #expect(set.ordered.keys == [7, 8])
    }
}
