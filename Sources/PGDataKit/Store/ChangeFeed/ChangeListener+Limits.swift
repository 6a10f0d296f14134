extension ChangeListener {
    /// How long notifications must be quiet before the log is read to move the position
    /// past the transactions delivered from payloads (their records were handed on
    /// already; the read only confirms it).
    static let quietReadDelay: Duration = .seconds(1)
    /// How many transactions delivered from payloads make the listener read the log at
    /// once (its position then covers them, and the set empties).
    static let maximumDelivered = 8_192
}
