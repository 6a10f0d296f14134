import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

/// The relay's wire format and meeting place, without a server: a fake relay (a socket of
/// this test's) writes messages in fragments, and the client must read exactly what was
/// sent, in order.
@Suite("Notification relay: protocol and endpoint")
struct NotificationRelayProtocolTests {
    /// A fresh directory (mode 700) removed afterwards.
    func withDirectory<T>(_ body: (String) throws -> T) throws -> T {
        let path = NSTemporaryDirectory() + "relay-test-" + UUID().uuidString.prefix(8)
        #expect(mkdir(path, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(path)
    }

    func endpoint(in directory: String, database: String = "shop") throws -> NotificationRelayEndpoint {
        try #require(
            try NotificationRelayEndpoint(
                configuration: ConnectionConfiguration("postgres://app@db.example:5432/\(database)"),
                channel: "pgdatakit_changes", directory: directory))
    }

    /// Accepts one connection at `path` on a thread and hands it to `serve`.
    final class FakeRelay: @unchecked Sendable {
        // Safe: `listening` is set once before the thread starts; the thread alone uses
        // the accepted socket.
        let listening: Int32
        let done = DispatchSemaphore(value: 0)

        init(at path: String, serve: @escaping @Sendable (Int32) -> Void) throws {
            listening = try LocalSocket.listen(at: path)
            let listening = self.listening
            let done = self.done
            Thread {
                var descriptor: Int32?
                while descriptor == nil {
                    _ = try? LocalSocket.poll([(listening, Int16(POLLIN))], timeout: .seconds(5))
                    descriptor = try? LocalSocket.accept(listening)
                }
                if let descriptor {
                    serve(descriptor)
                    close(descriptor)
                }
                done.signal()
            }.start()
        }

        deinit { close(listening) }

        /// Writes all of `bytes`, in pieces of the given sizes (the rest in one piece).
        static func write(_ descriptor: Int32, _ bytes: [UInt8], pieces: [Int] = []) {
            var offset = 0
            for size in pieces + [bytes.count] where offset < bytes.count {
                let end = min(bytes.count, offset + size)
                var sent = offset
                while sent < end {
                    sent = (try? LocalSocket.send(descriptor, Array(bytes[..<end]), from: sent)) ?? end
                    if sent < end { usleep(1_000) }
                }
                offset = end
                usleep(2_000)
            }
        }
    }

    @Test func messagesSplitAnywhereArriveWholeAndInOrder() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            let sent = (0..<300).map { index in
                PostgresNotification(
                    channel: "pgdatakit_changes",
                    payload: index % 7 == 0 ? "" : "r2 \(index) " + String(repeating: "é", count: index * 3),
                    senderPID: Int32(40_000 + index))
            }
            var stream: [UInt8] = []
            NotificationRelay.Message.encode(NotificationRelay.Message.key, Array(endpoint.key.utf8), into: &stream)
            for (index, notification) in sent.enumerated() {
                NotificationRelay.Message.encode(notification, into: &stream)
                if index % 50 == 0 { NotificationRelay.Message.encode(NotificationRelay.Message.heartbeat, [], into: &stream) }
            }
            let bytes = stream
            let relay = try FakeRelay(at: endpoint.socketPath) { descriptor in
                // The key itself in three pieces, then odd sizes cutting through headers.
                FakeRelay.write(descriptor, bytes, pieces: [1, 3, 7, 2, 4_000, 5, 1, 999, 12_345])
            }
            let client = try #require(
                try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .seconds(5)))
            var received: [PostgresNotification] = []
            let start = ContinuousClock.now
            while received.count < sent.count, start.duration(to: .now) < .seconds(10) {
                _ = try LocalSocket.poll([(client.descriptor, Int16(POLLIN))], timeout: .milliseconds(100))
                received += try client.receive()
            }
            #expect(received == sent)
            relay.done.wait()
            // The relay closed: the client says so instead of waiting forever.
            #expect(throws: LocalSocket.Failure.self) {
                _ = try LocalSocket.poll([(client.descriptor, Int16(POLLIN))], timeout: .seconds(1))
                _ = try client.receive()
            }
        }
    }

    /// A save's thread hands its payload to the hosting process without waiting on it
    /// (`sendWithoutWaiting`): while the host reads nothing, payloads go until the
    /// socket is full, and then the call says `false` at once, having sent nothing. What
    /// the host reads afterwards is exactly the messages that were taken, whole.
    @Test func sendingWithoutWaitingSendsWholeMessagesOrNothing() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            var key: [UInt8] = []
            NotificationRelay.Message.encode(NotificationRelay.Message.key, Array(endpoint.key.utf8), into: &key)
            let keyMessage = key
            let clientDone = DispatchSemaphore(value: 0)
            let received = Mutex<[UInt8]>([])
            let relay = try FakeRelay(at: endpoint.socketPath) { descriptor in
                FakeRelay.write(descriptor, keyMessage)
                clientDone.wait()
                var buffer: [UInt8] = []
                var scratch: [UInt8] = []
                while true {
                    _ = try? LocalSocket.poll([(descriptor, Int16(POLLIN))], timeout: .milliseconds(500))
                    guard let read = try? LocalSocket.receive(descriptor, appendingTo: &buffer, scratch: &scratch), read > 0
                    else { break }
                }
                received.withLock { $0 = buffer }
            }
            let client = try #require(
                try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .seconds(5)))
            let payload = "r2 1 2 " + String(repeating: "x", count: 200)
            var taken = 0
            let start = ContinuousClock.now
            while taken < 1_000_000, try client.sendWithoutWaiting(toNotify: [payload]) { taken += 1 }
            // Refused at once: nothing waited for the socket (a wait would be a second).
            #expect(start.duration(to: .now) < .milliseconds(900))
            #expect(try client.sendWithoutWaiting(toNotify: [payload]) == false)
            clientDone.signal()
            relay.done.wait()
            var expected: [UInt8] = []
            for _ in 0..<taken { NotificationRelay.Message.encode(toNotify: [payload], into: &expected) }
            #expect(taken > 10 && taken < 1_000_000)
            #expect(received.withLock { $0 } == expected)
        }
    }

    /// Positions the hosting process passes on (`S` messages) arrive among the
    /// notifications: each read gives the notifications that arrived and the last
    /// position among them, and a position is never handed out before the notifications
    /// sent ahead of it.
    @Test func positionsArriveAfterTheNotificationsSentBeforeThem() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            var stream: [UInt8] = []
            NotificationRelay.Message.encode(NotificationRelay.Message.key, Array(endpoint.key.utf8), into: &stream)
            for index in 0..<40 {
                let note = PostgresNotification(channel: "pgdatakit_changes", payload: "n\(index)", senderPID: 7)
                NotificationRelay.Message.encode(note, into: &stream)
                if index % 10 == 9 {
                    NotificationRelay.Message.encode(NotificationRelay.Message.position, Array("p\(index)".utf8), into: &stream)
                }
            }
            let bytes = stream
            let relay = try FakeRelay(at: endpoint.socketPath) { descriptor in
                FakeRelay.write(descriptor, bytes, pieces: [3, 9, 2, 40, 1, 17, 120, 5])
            }
            let client = try #require(
                try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .seconds(5)))
            var received: [String] = []
            var positions: [(position: String, after: Int)] = []
            let start = ContinuousClock.now
            while positions.last?.position != "p39", start.duration(to: .now) < .seconds(10) {
                _ = try LocalSocket.poll([(client.descriptor, Int16(POLLIN))], timeout: .milliseconds(100))
                let (notifications, position) = try client.receiveMessages()
                received += notifications.map(\.payload)
                if let position { positions.append((position, received.count)) }
            }
            #expect(received == (0..<40).map { "n\($0)" })
            for (position, after) in positions {
                let index = try #require(Int(position.dropFirst()))
                #expect(after >= index + 1, "\(position) handed out with only \(after) notifications")
            }
            #expect(positions.last?.position == "p39")
            relay.done.wait()
        }
    }

    /// A pace (`W`) travels in whole milliseconds, cut to the relay's longest; a body of
    /// another length is no pace (the relay drops a follower that sends one).
    @Test func pacesTravelInMillisecondsUpToTheLongest() throws {
        func decoded(_ pace: Duration) throws -> Duration? {
            var bytes: [UInt8] = []
            NotificationRelay.Message.encode(pace: pace, into: &bytes)
            var offset = 0
            guard case .message(NotificationRelay.Message.pace, let body) = NotificationRelay.Message.frame(in: bytes, at: &offset)
            else { return nil }
            #expect(offset == bytes.count)
            return NotificationRelay.Message.pace(in: body)
        }
        #expect(try decoded(.zero) == .zero)
        #expect(try decoded(.milliseconds(100)) == .milliseconds(100))
        #expect(try decoded(.microseconds(2_500)) == .milliseconds(2))
        #expect(try decoded(.seconds(30)) == NotificationRelay.maximumPace)
        #expect(try decoded(.milliseconds(-5)) == .zero)
        #expect(NotificationRelay.Message.pace(in: [0, 0, 0xff, 0xff][...]) == NotificationRelay.maximumPace)
        #expect(NotificationRelay.Message.pace(in: [0, 100][...]) == nil)
        #expect(NotificationRelay.Message.pace(in: [0, 0, 0, 0, 100][...]) == nil)
    }

    /// A relay that sends and closes at once: what it sent is handed out first, then the
    /// close is reported (whether the close is seen in the same read as the last bytes or
    /// already while the key is read). It used to throw with the notifications unread.
    @Test func notificationsSentBeforeTheRelayClosedAreHandedOutFirst() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            var stream: [UInt8] = []
            NotificationRelay.Message.encode(NotificationRelay.Message.key, Array(endpoint.key.utf8), into: &stream)
            var sent: [PostgresNotification] = []
            // Exactly 65,536 bytes, a full read: the next one meets the close.
            while 65_536 - stream.count > 0 {
                let room = 65_536 - stream.count - 9
                let payload = String(repeating: "x", count: room > 2_000 ? 1_000 : room)
                let notification = PostgresNotification(channel: "pgdatakit_changes", payload: payload, senderPID: Int32(sent.count))
                NotificationRelay.Message.encode(notification, into: &stream)
                sent.append(notification)
            }
            #expect(stream.count == 65_536)
            let bytes = stream
            let relay = try FakeRelay(at: endpoint.socketPath) { descriptor in FakeRelay.write(descriptor, bytes) }
            let client = try #require(
                try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .seconds(5)))
            relay.done.wait()  // sent and closed before the client reads on
            var received: [PostgresNotification] = []
            var closed = false
            while !closed {
                do {
                    _ = try LocalSocket.poll([(client.descriptor, Int16(POLLIN))], timeout: .seconds(1))
                    received += try client.receive()
                } catch is LocalSocket.Failure {
                    closed = true
                }
            }
            #expect(received == sent)
        }
    }

    @Test func aRelayForAnotherKeyIsRefused() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            let other = try self.endpoint(in: directory, database: "other")
            var stream: [UInt8] = []
            NotificationRelay.Message.encode(NotificationRelay.Message.key, Array(other.key.utf8), into: &stream)
            let bytes = stream
            let relay = try FakeRelay(at: endpoint.socketPath) { FakeRelay.write($0, bytes) }
            #expect(throws: LocalSocket.Failure.self) {
                _ = try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .seconds(5))
            }
            relay.done.wait()
        }
    }

    @Test func aRelayThatSendsSomethingElseFirstOrTooLongIsRefused() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            for first in [[UInt8(ascii: "N"), 0, 0, 0, 4, 0, 0, 0, 1], [UInt8(ascii: "K"), 0xff, 0xff, 0xff, 0xff]] {
                let relay = try FakeRelay(at: endpoint.socketPath) { FakeRelay.write($0, first) }
                #expect(throws: LocalSocket.Failure.self) {
                    _ = try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .seconds(5))
                }
                relay.done.wait()
            }
        }
    }

    @Test func aRelayThatNeverAnswersTimesOut() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            // The relay answers only once the test is done with it: a client that ignored its
            // timeout would wait the whole minute (a bound of one second against a relay
            // that answered after 1.5 s failed on a loaded machine).
            let answer = DispatchSemaphore(value: 0)
            let relay = try FakeRelay(at: endpoint.socketPath) { _ in _ = answer.wait(timeout: .now() + 60) }
            let start = ContinuousClock.now
            #expect(throws: LocalSocket.Failure.self) {
                _ = try NotificationRelayClient.connect(to: endpoint, channel: "pgdatakit_changes", timeout: .milliseconds(300))
            }
            #expect(start.duration(to: .now) < .seconds(30))
            answer.signal()
            relay.done.wait()
        }
    }

    @Test func nothingListeningIsNoRelay() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            #expect(try NotificationRelayClient.connect(to: endpoint, channel: "c", timeout: .seconds(1)) == nil)
            // A socket file left by a process that died: nobody accepts on it.
            let stale = try LocalSocket.listen(at: endpoint.socketPath)
            close(stale)
            #expect(FileManager.default.fileExists(atPath: endpoint.socketPath))
            #expect(try NotificationRelayClient.connect(to: endpoint, channel: "c", timeout: .seconds(1)) == nil)
        }
    }

    @Test func theLockIsHeldByOneDescriptorAtATime() throws {
        try withDirectory { directory in
            let endpoint = try endpoint(in: directory)
            let first = try #require(try endpoint.tryLock())
            #expect(try endpoint.tryLock() == nil)
            close(first)
            let second = try #require(try endpoint.tryLock())
            close(second)
        }
    }

    @Test func endpointsAreNamedByServerDatabaseUserAndChannel() throws {
        try withDirectory { directory in
            func path(_ url: String, channel: String = "pgdatakit_changes") throws -> String {
                try #require(
                    try NotificationRelayEndpoint(
                        configuration: ConnectionConfiguration(url), channel: channel, directory: directory)
                ).socketPath
            }
            let base = try path("postgres://app@db:5432/shop")
            #expect(base.hasPrefix(directory + "/") && base.hasSuffix(".sock"))
            #expect(try path("postgres://app@db:5432/shop?application_name=x") == base)
            #expect(try path("postgres://app:secret@db:5432/shop") == base)
            for other in [
                "postgres://app@db:5433/shop", "postgres://app@db2:5432/shop", "postgres://app@db:5432/other",
                "postgres://reader@db:5432/shop",
            ] {
                #expect(try path(other) != base, "\(other)")
            }
            #expect(try path("postgres://app@db:5432/shop", channel: "other") != base)
            // Stable across processes: a fixed function of the key, not Swift's seeded hash.
            #expect(NotificationRelayEndpoint.name(of: "") == "cbf29ce484222325" + "6c62272e07bb0142")
            #expect(NotificationRelayEndpoint.name(of: "a") == "af63dc4c8601ec8c" + NotificationRelayEndpoint.name(of: "a").suffix(16))
        }
    }

    @Test func aDirectoryOpenToOthersOrALinkIsRefused() throws {
        try withDirectory { directory in
            let open = directory + "/open"
            #expect(mkdir(open, 0o755) == 0)
            chmod(open, 0o755)
            let link = directory + "/link"
            let real = directory + "/real"
            #expect(mkdir(real, 0o700) == 0)
            #expect(symlink(real, link) == 0)
            let file = directory + "/file"
            #expect(FileManager.default.createFile(atPath: file, contents: Data()))
            for unsafe in [open, link, file] {
                #expect(throws: LocalSocket.Failure.self, "\(unsafe)") {
                    _ = try NotificationRelayEndpoint(
                        configuration: ConnectionConfiguration("postgres://app@db/shop"), channel: "c", directory: unsafe)
                }
            }
            // A missing directory is made, closed to others.
            let made = directory + "/made"
            _ = try NotificationRelayEndpoint(
                configuration: ConnectionConfiguration("postgres://app@db/shop"), channel: "c", directory: made)
            var status = stat()
            #expect(lstat(made, &status) == 0)
            #expect(status.st_mode & 0o777 == 0o700)
            // A directory whose socket path would not fit a socket address.
            let long = directory + "/" + String(repeating: "d", count: 100)
            #expect(throws: LocalSocket.Failure.self) {
                _ = try NotificationRelayEndpoint(
                    configuration: ConnectionConfiguration("postgres://app@db/shop"), channel: "c", directory: long)
            }
        }
    }

    @Test("A read appends what arrived through the caller's scratch: in pieces no larger than it, 0 when nothing waits, nil at the end")
    func aReadAppendsThroughTheScratch() throws {
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { close(ends[0]) }
        var buffer: [UInt8] = [7]
        var scratch = [UInt8](repeating: 0, count: 16)
        #expect(try LocalSocket.receive(ends[0], appendingTo: &buffer, scratch: &scratch) == 0)
        let sent = (0..<40).map { UInt8($0) }
        #expect(try LocalSocket.send(ends[1], sent, from: 0) == 40)
        var counts: [Int] = []
        while let count = try LocalSocket.receive(ends[0], appendingTo: &buffer, scratch: &scratch), count > 0 {
            counts.append(count)
        }
        #expect(counts == [16, 16, 8])
        #expect(buffer == [7] + sent)
        #expect(scratch.count == 16)
        close(ends[1])
        #expect(try LocalSocket.receive(ends[0], appendingTo: &buffer, scratch: &scratch) == nil)
        // An empty scratch gets room first.
        var empty: [UInt8] = []
        var other: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &other) == 0)
        defer { close(other[0]); close(other[1]) }
        #expect(try LocalSocket.send(other[1], sent, from: 0) == 40)
        var received: [UInt8] = []
        #expect(try LocalSocket.receive(other[0], appendingTo: &received, scratch: &empty) == 40)
        #expect(received == sent)
        #expect(empty.count == LocalSocket.receiveSize)
    }
}
