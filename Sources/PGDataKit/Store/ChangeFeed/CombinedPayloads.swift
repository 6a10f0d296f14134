import PGDataKitPostgres

/// Several saves' payloads in one notification.
///
/// A host's notifier sends the payloads it gathered in one transaction; each
/// `pg_notify` is a notification the server queues, signals every listening session
/// for and delivers one by one, and a listener reads one by one. Payloads that fit
/// together in one notification's payload (PostgreSQL takes up to 7,999 bytes) go as one:
/// a line feed, then the payloads, each after a line feed. A payload itself never holds
/// a line feed (its fields are separated by spaces, and its record is compact JSON,
/// whose strings escape control characters), so a notification whose payload starts
/// with one is a combination and any other is a single payload, told apart by its first
/// byte. A listener of an earlier version reads a combination as unreadable, or only
/// its first payload's header (while none of its observers wants records), and reads
/// the log for the rest: it misses nothing, it only reads more.
extension ChangeLog {
    /// The most bytes of one notification's payload PostgreSQL accepts.
    static let maximumNotificationBytes = 7_999

    /// The byte before each payload of a combination (a line feed).
    static let payloadSeparator = UInt8(ascii: "\n")

    /// The payloads of a batch as notifications, in order: as many payloads as fit in one
    /// notification go together; a payload alone is sent as it is.
    static func combined(_ payloads: [String]) -> [String] {
        // (One payload, the common case off a busy host: the array as it is, none made.)
        guard payloads.count > 1 else { return payloads }
        let separator = String(Unicode.Scalar(payloadSeparator))
        var notifications: [String] = []
        var index = 0
        while index < payloads.count {
            // As many as fit, each with its separator (a payload too long to share a
            // notification goes alone, unchanged).
            var bytes = payloads[index].utf8.count + 1
            var end = index + 1
            while end < payloads.count {
                let next = payloads[end].utf8.count + 1
                guard bytes + next <= maximumNotificationBytes else { break }
                bytes += next
                end += 1
            }
            if end == index + 1 {
                notifications.append(payloads[index])
            } else {
                var text = ""
                text.reserveCapacity(bytes)
                for payload in payloads[index..<end] {
                    text += separator
                    text += payload
                }
                notifications.append(text)
            }
            index = end
        }
        return notifications
    }

    /// The payloads of notifications as sent (`combined(_:)`), in order: a combination's
    /// each, any other notification's payload as it is (read as they are asked for: no
    /// array made for notifications that carry one payload each, the common case).
    static func separated(_ notifications: [PostgresNotification]) -> SeparatedPayloads {
        SeparatedPayloads(notifications: notifications)
    }

    /// `separated(_:)`'s payloads, one by one.
    struct SeparatedPayloads: Sequence, IteratorProtocol {
        let notifications: [PostgresNotification]
        /// The next notification to read.
        private var index = 0
        /// The payloads of the combination read last, and the next of them to hand out.
        private var parts: [String] = []
        private var part = 0

        init(notifications: [PostgresNotification]) {
            self.notifications = notifications
        }

        mutating func next() -> String? {
            while part >= parts.count {
                guard index < notifications.count else { return nil }
                let payload = notifications[index].payload
                index += 1
                guard payload.utf8.first == payloadSeparator else { return payload }
                parts = Self.parts(of: payload)
                part = 0
            }
            defer { part += 1 }
            return parts[part]
        }

        /// The payloads of a combination, each after a separator (empty ones left out).
        /// (A scan of the bytes: the standard library's generic `split` took about 40
        /// instructions a byte.)
        private static func parts(of combination: String) -> [String] {
            var text = combination
            return text.withUTF8 { bytes in
                var parts: [String] = []
                var start = 0
                for index in 0...bytes.count where index == bytes.count || bytes[index] == payloadSeparator {
                    if index > start {
                        // Unsafe: a range within the bytes, read (copied) inside the call only.
                        parts.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                    }
                    start = index + 1
                }
                return parts
            }
        }
    }
}
