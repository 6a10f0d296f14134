import PGDataKitPostgres

/// A batch save's `UPDATE` parameters, bound while its lock statement runs.
///
/// Between the lock statement's answer and the first `UPDATE` the client bound each update
/// group's arrays (keys, versions, the written columns: a few hundred instructions a row)
/// with the server idle. A save that inserts nothing (so that every updated object's key
/// is its own, and nothing the save writes first changes what its updates write) binds
/// them while the lock statement runs (`Connection.doWhileWaiting`); each group is then
/// sent as bound, with the location its lock found appended. A group the work did not
/// bind (the lock statement ran none, or binding threw) is bound when it is written, as
/// before, and reports its error then.
extension SavePipeline {
    /// The update groups bound ahead, in the plan's order.
    final class UpdatesAhead {
        /// Each group's rows and bound arrays; empty until the work ran.
        private(set) var groups: [(rows: RowBatch, arrays: [(any PostgresEncodable)?], types: [String])?] = []

        /// Binds every group of `updates` (`keys` gives the objects' primary keys).
        fileprivate func bind(
            _ updates: [(shape: SavePlan.UpdateShape, objects: [ManagedObject])], keys: SaveKeys, by coordinator: StoreCoordinator
        ) {
            var keys = keys
            groups = updates.map { shape, objects in
                guard let entity = objects.first?.entity else { return nil }
                let rows = keys.rows(objects, entity, attributes: shape.attributeIndexes, toOne: shape.toOneIndexes)
                guard let (arrays, types) = try? coordinator.bind(rows) else { return nil }
                return (rows, arrays, types)
            }
        }

        /// Group `position` as bound, if it was.
        func group(_ position: Int) -> (rows: RowBatch, arrays: [(any PostgresEncodable)?], types: [String])? {
            position < groups.count ? groups[position] : nil
        }
    }

    /// Has `connection` bind the plan's update groups while its next statement (the
    /// save's lock statement) runs, when the save inserts nothing and its lock statement
    /// is sent unprepared (more rows than `StoreCoordinator.shortListLength`: a prepared
    /// statement runs no work while it waits). The caller clears the work once the locks
    /// are taken (`doWhileWaiting(nil)`).
    func bindUpdatesAhead(_ plan: SavePlan, keys: SaveKeys, on connection: Connection) -> UpdatesAhead? {
        guard plan.inserts.isEmpty, plan.deletes.isEmpty,
            plan.updates.reduce(0, { $0 + $1.objects.count }) > StoreCoordinator.shortListLength
        else { return nil }
        let ahead = UpdatesAhead()
        let coordinator = context.coordinator
        connection.doWhileWaiting { ahead.bind(plan.updates, keys: keys, by: coordinator) }
        return ahead
    }
}
