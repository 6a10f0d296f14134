/// The token after each record of one history read.
///
/// A read after token T takes snapshot S and returns the records that S sees committed
/// and T does not cover, ordered by id (`ChangeLog.readHistory`). After the first k of
/// them, the position must cover exactly what T covers plus their transactions — not the
/// transactions of the records still to come, nor any transaction running in S. That
/// is again a snapshot:
///
/// - xmax = the greater of T's xmax and one past each transaction delivered so far;
/// - running = the transactions below xmax that must stay uncovered: those running in
///   S, those of the page's records still to come, and those of records left for a
///   later page (`beyond`).
///
/// Proof: a transaction y below xmax and not in that list has ended in S (it is below
/// S's xmax and not running there). If it has a record, S sees it, so either T covers y
/// or y's record was in this read — in the page before record k+1 (so delivered) or
/// after it, or beyond the page (both in the list). So the token covers exactly T's
/// transactions and the k delivered ones, among the transactions with records;
/// transactions without a record may fall either side, which changes nothing. When the
/// page is not cut by the limit, the position after it is S itself.
///
/// The read hint of token k (see `floor`): every record not covered has an id above
/// record k's (ids of the page are ascending; records left for later have higher ids
/// than the page's first part; a transaction that gets its id after S draws a higher
/// record id, see `ChangeLog.writeStatement`), unless its transaction was running in
/// S, or is partly delivered (several records in one transaction): those go to `lookup`
/// when not below xmax — or its transaction is at or above S's xmax, running in S
/// although S does not list it (it had its id before S, but no transaction with a
/// higher id had ended yet), which may have drawn its record id before S:
/// `lookupFrom` is S's xmax. A record that does not complete its transaction covers nothing new and
/// carries the token before it, so that tokens along a feed never go back.
extension HistoryToken {
    static func tokens(
        after start: HistoryToken, read snapshot: HistoryToken, page: [ChangeLog.PageEntry], beyond: [UInt64],
        full: Bool
    ) -> (records: [HistoryToken], end: HistoryToken) {
        guard !page.isEmpty else { return ([], full ? start : snapshot) }
        var remaining: [UInt64: Int] = [:]
        for entry in page { remaining[entry.transaction, default: 0] += 1 }
        // The page's transactions not yet covered, descending (the smallest, usually
        // covered next, at the end).
        var uncovered = remaining.keys.sorted(by: >)
        var partial: Set<UInt64> = []
        let firstPartEnd = page.lazy.filter { !$0.extra }.map(\.id).max()
        let running = snapshot.running
        var xmax = start.xmax
        var tokens: [HistoryToken] = []
        tokens.reserveCapacity(page.count)
        for entry in page {
            let transaction = entry.transaction
            let left = (remaining[transaction] ?? 1) - 1
            remaining[transaction] = left
            guard left == 0 else {
                // A transaction with more records to come: nothing more is covered, and
                // the previous token's hint still finds this record's transaction.
                partial.insert(transaction)
                tokens.append(tokens.last ?? start)
                continue
            }
            partial.remove(transaction)
            if uncovered.last == transaction {
                uncovered.removeLast()
            } else if let index = uncovered.firstIndex(of: transaction) {
                uncovered.remove(at: index)
            }
            if transaction >= xmax { xmax = transaction + 1 }
            var list: [UInt64] = []
            for value in running {
                if value >= xmax { break }
                list.append(value)
            }
            for value in beyond {
                if value >= xmax { break }
                list.append(value)
            }
            for value in uncovered.reversed() {
                if value >= xmax { break }
                list.append(value)
            }
            var lookup = Array(running[lowerBound(running, xmax)...])
            for value in partial where value >= xmax { lookup.append(value) }
            let floor = min(entry.id, firstPartEnd ?? entry.id)
            tokens.append(
                HistoryToken(xmax: xmax, running: list, floor: floor, lookup: lookup, lookupFrom: snapshot.xmax))
        }
        if full, let last = tokens.last { return (tokens, last) }
        tokens[tokens.count - 1] = snapshot
        return (tokens, snapshot)
    }
}

/// Records read after a history token, and where the next read starts.
///
/// For example, paging through everything after a token:
///
/// ```swift
/// var token = try coordinator.oldestHistoryToken()
/// while true {
///     let page = try coordinator.history(after: token, limit: 1_000)
///     for record in page.records { print(record) }
///     token = page.token
///     if !page.hasMore { break }
/// }
/// ```
public struct HistoryPage: Sendable {
    /// The records, in commit order (oldest id first within one read), each carrying
    /// the token after it.
    public let records: [ChangeRecord]
    /// Where to read next: the last record's token when the limit cut the page, else the
    /// position of the read itself (after everything committed by then).
    public let token: HistoryToken
    /// Whether more records were committed before the read than the limit let through.
    public let hasMore: Bool
}
