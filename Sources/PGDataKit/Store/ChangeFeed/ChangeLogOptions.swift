/// How a coordinator keeps and follows the change log.
///
/// For example, keep records for two days and prune every five minutes:
///
/// ```swift
/// let coordinator = try StoreCoordinator(
///     model: model, configuration: configuration,
///     changeLog: ChangeLogOptions(retention: .seconds(2 * 86_400), pruneInterval: .seconds(300)))
/// ```
public struct ChangeLogOptions: Sendable {
    /// Records older than this are deleted. A process disconnected for longer misses
    /// them (its main context keeps stale objects until it refetches).
    public var retention: Duration
    /// How often the listener tries to prune (one process prunes at a time).
    public var pruneInterval: Duration
    /// The first wait before reconnecting a dropped listener; it doubles per failure.
    public var reconnectDelay: Duration
    /// The longest wait between reconnection attempts.
    public var maximumReconnectDelay: Duration
    /// Whether the processes of a host share one listening session (see `ListenerRelay`).
    public var relay: ListenerRelay
    /// How long a listener that could not reach its host's relay (while it changed hands,
    /// say) listens on its own session before it tries the relay again.
    public var relayRetryDelay: Duration = .seconds(30)
    /// How often the listener checks the log for saves that committed but whose
    /// notification never came (their process ended between the commit and the
    /// notification, which is sent after it): one statement while nothing new is there, a
    /// read of the log when something is. Such a save reaches this process within this
    /// time; `nil` leaves it to the next notification or reconnection. One second by
    /// default. On a host whose processes share a relay (`relay`), only the process
    /// hosting it checks, for every process of the host, with its own interval (the
    /// others check with theirs while it is silent for three of their intervals).
    ///
    /// For example, to check every 250 milliseconds:
    ///
    /// ```swift
    /// var options = ChangeLogOptions()
    /// options.unannouncedCheckInterval = .milliseconds(250)
    /// ```
    public var unannouncedCheckInterval: Duration? = .seconds(1)
    /// How long a registered history reader (`StoreCoordinator.historyReader(named:)`)
    /// holds back pruning after its last acknowledgement: records it has not
    /// acknowledged are kept past the retention while it acknowledged within this time.
    /// A reader silent for longer is ignored (a consumer that died cannot hold the log
    /// for ever); pruning then logs a warning naming it, and it gets
    /// `HistoryError.historyExpired` if records it had not read are gone. Applies where
    /// this process prunes.
    public var maximumHistoryReaderAge: Duration

    /// Options with defaults: one day of retention, pruning every ten minutes, reconnects
    /// after 50 ms doubling up to 5 s, one listening session per host, history readers
    /// holding records for up to a week after their last acknowledgement.
    public init(
        retention: Duration = .seconds(86_400), pruneInterval: Duration = .seconds(600),
        reconnectDelay: Duration = .milliseconds(50), maximumReconnectDelay: Duration = .seconds(5),
        relay: ListenerRelay = .automatic, maximumHistoryReaderAge: Duration = .seconds(7 * 86_400)
    ) {
        self.retention = retention
        self.pruneInterval = pruneInterval
        self.reconnectDelay = reconnectDelay
        self.maximumReconnectDelay = maximumReconnectDelay
        self.relay = relay
        self.maximumHistoryReaderAge = maximumHistoryReaderAge
    }
}
