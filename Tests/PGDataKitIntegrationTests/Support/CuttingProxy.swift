import Foundation
import PGDataKit

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy between a coordinator and the test server that breaks a session at a
/// chosen moment of a `COMMIT`, as a dying server process or network would: tests land
/// a failure exactly there, every time, instead of hoping a timed kill does.
///
/// It reads the protocol's message framing (type byte and length) in both directions and
/// nothing else: the client's `Parse`/`Query` of `COMMIT`, the server's `CommandComplete`
/// of `COMMIT`, and `BackendKeyData` (the backend's process id, handed to `onCut` so the
/// test can terminate the backend too). Sessions go without TLS (`sslmode=disable`).
///
/// A cut is armed (`arm(_:)`) and fires once, at the next `COMMIT` on any session.
final class CuttingProxy: @unchecked Sendable {
    // Safe to share: `state` is only touched under `lock`; each session's sockets are
    // read by one pump thread each and closed once, when both pumps are done.

    /// Where a session breaks.
    enum Cut: Sendable, CustomStringConvertible {
        /// The server runs the `COMMIT`; its result never reaches the client.
        case beforeCommitResult
        /// The client reads the `COMMIT`'s result; then the backend is terminated, and
        /// the client gets its error instead of the pipeline's end (the sync point's
        /// `ReadyForQuery` is held back).
        case afterCommitResult
        /// The `COMMIT` never reaches the server: the client is cut off once the
        /// statement before it is answered. With `keepServerSession` the server's side
        /// stays open, so its backend idles in the transaction until someone ends it.
        case commitNeverSent(keepServerSession: Bool)

        var description: String {
            switch self {
            case .beforeCommitResult: return "cut before the COMMIT's result"
            case .afterCommitResult: return "cut after the COMMIT's result"
            case .commitNeverSent(let keep): return keep ? "COMMIT never sent, backend left idle" : "COMMIT never sent"
            }
        }
    }

    private final class Session: @unchecked Sendable {
        // Safe: `pid` and `droppingCommit` are written and read under the proxy's lock.
        let client: Int32
        let server: Int32
        var pid: Int32 = 0
        /// The change listener's session: never cut (its own COMMITs are not saves).
        var isListener = false
        var droppingCommit: Cut?
        /// How many statements the pipeline of the dropped `COMMIT` runs before it (its
        /// `Execute`s since the last `Sync`: a `BEGIN` sent along counts): the cut
        /// follows the last one's answer.
        var answersBeforeCut = 1
        var pumpsRunning = 2
        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    private struct State {
        /// The cuts to make, at the next COMMITs in order.
        var armed: [Cut] = []
        var cuts = 0
        var roundTrips = 0
        var refusesConnections = false
        var sessions: [Session] = []
        var isClosed = false
    }

    private let lock = NSLock()
    private var state = State()
    private let listener: Int32
    private let upstream: (host: String, port: Int)
    /// The configuration of the proxied database, pointing at the proxy.
    let configuration: ConnectionConfiguration
    /// Called on the pump thread with the backend's process id when a cut fires, before
    /// the sockets close (tests terminate the backend here).
    let onCut: @Sendable (Int32) -> Void

    /// Starts a proxy on a free local port in front of the server `target` points at.
    init(inFrontOf target: ConnectionConfiguration, onCut: @escaping @Sendable (Int32) -> Void) throws {
        let parameters = target.parameters() ?? [:]
        upstream = (parameters["hostaddr"] ?? parameters["host"] ?? "127.0.0.1", Int(parameters["port"] ?? "") ?? 5432)
        self.onCut = onCut
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw ProxyError("socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(listener, 64) == 0 else {
            Glibc.close(listener)
            throw ProxyError("bind/listen: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        var configuration = target
        configuration.overrides["host"] = "127.0.0.1"
        configuration.overrides["hostaddr"] = "127.0.0.1"
        configuration.overrides["port"] = String(port)
        configuration.overrides["sslmode"] = "disable"
        configuration.overrides["gssencmode"] = "disable"
        self.configuration = configuration
        self.listener = listener
        Thread.detachNewThread { [self] in acceptLoop(listener) }
    }

    // The listening socket is closed here, once the accept loop (which holds the proxy)
    // has ended: closed any earlier, its number could go to another test's socket, which
    // a later `shutdown` of it would break.
    deinit {
        close()
        Glibc.close(listener)
    }

    /// Arms a cut for the next `COMMIT`.
    func arm(_ cut: Cut) {
        arm([cut])
    }

    /// Arms cuts for the next `COMMIT`s, one each, in order.
    func arm(_ cuts: [Cut]) {
        lock.withLock { state.armed = cuts }
    }

    /// Drops the cuts that have not fired.
    func disarm() {
        lock.withLock { state.armed = [] }
    }

    /// Whether a cut has not fired yet.
    var isArmed: Bool { lock.withLock { !state.armed.isEmpty } }

    /// How many cuts fired.
    var cuts: Int { lock.withLock { state.cuts } }

    /// How many round trips the clients began, listener sessions aside: the `Sync`
    /// messages (each ends a pipeline, or one statement of the extended protocol, and
    /// the client then waits for the server's `ReadyForQuery`) and simple `Query`
    /// messages the proxy forwarded.
    var roundTrips: Int { lock.withLock { state.roundTrips } }

    /// New sessions are closed at once (the server looks unreachable) while set.
    func refuseConnections(_ refuse: Bool) {
        lock.withLock { state.refusesConnections = refuse }
    }

    /// Stops accepting and breaks every session; later calls do nothing.
    ///
    /// Once only, and under the lock: a session's sockets are closed (`finish`) only after
    /// it left `state.sessions` under the lock, so every socket shut down here is still the
    /// session's. (It used to shut the listening socket down again at every call — `deinit`
    /// calls it after the test's own call — and the sessions' sockets outside the lock:
    /// by then their numbers could belong to another test's connection, which broke with
    /// "server closed the connection unexpectedly".)
    func close() {
        lock.withLock {
            guard !state.isClosed else { return }
            state.isClosed = true
            shutdown(listener, Int32(SHUT_RDWR))
            for session in state.sessions {
                shutdown(session.client, Int32(SHUT_RDWR))
                shutdown(session.server, Int32(SHUT_RDWR))
            }
        }
    }

    // MARK: - Sessions

    private func acceptLoop(_ listener: Int32) {
        // (The listening socket is closed by `deinit`, after this loop.)
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let (closed, refuses) = lock.withLock { (state.isClosed, state.refusesConnections) }
            if closed || refuses {
                Glibc.close(client)
                if closed { return }
                continue
            }
            // (A connect a signal interrupts, or one the loaded machine refuses for a
            // moment, is tried again; a session that still finds no server is closed, and
            // why goes to the test log, so that a test failing on it says so.)
            var server = connectUpstream()
            for _ in 0..<3 where server < 0 {
                let failure = errno
                guard failure == EINTR || failure == EAGAIN || failure == ECONNREFUSED else { break }
                usleep(20_000)
                server = connectUpstream()
            }
            guard server >= 0 else {
                let failure = String(cString: strerror(errno))
                FileHandle.standardError.write(
                    Data("CuttingProxy: no session to \(upstream.host):\(upstream.port) (\(failure)); client closed\n".utf8))
                Glibc.close(client)
                continue
            }
            var yes: Int32 = 1
            setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(server, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let session = Session(client: client, server: server)
            lock.withLock { state.sessions.append(session) }
            Thread.detachNewThread { [self] in pumpClientToServer(session) }
            Thread.detachNewThread { [self] in pumpServerToClient(session) }
        }
    }

    private func connectUpstream() -> Int32 {
        if upstream.host.hasPrefix("/") {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return -1 }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = Array("\(upstream.host)/.s.PGSQL.\(upstream.port)".utf8CString)
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in path.prefix(buffer.count - 1).enumerated() { buffer[index] = UInt8(bitPattern: byte) }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if connected != 0 {
                let failure = errno
                Glibc.close(fd)
                errno = failure  // (the caller reads why)
                return -1
            }
            return fd
        }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(upstream.host, String(upstream.port), &hints, &result) == 0, let first = result else {
            errno = EAGAIN  // (an address lookup that failed: worth another try)
            return -1
        }
        defer { freeaddrinfo(result) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return -1 }
        if connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 {
            let failure = errno
            Glibc.close(fd)
            errno = failure  // (the caller reads why)
            return -1
        }
        return fd
    }

    /// Ends one pump; the second one closes the sockets.
    private func finish(_ session: Session) {
        let last = lock.withLock {
            session.pumpsRunning -= 1
            if session.pumpsRunning == 0 { state.sessions.removeAll { $0 === session } }
            return session.pumpsRunning == 0
        }
        guard last else { return }
        Glibc.close(session.client)
        Glibc.close(session.server)
    }

    /// Claims the armed cut for a session if `matches` says it is the one.
    private func claim(for session: Session, _ matches: (Cut) -> Bool) -> Cut? {
        lock.withLock {
            guard !session.isListener, let cut = state.armed.first, matches(cut) else { return nil }
            state.armed.removeFirst()
            state.cuts += 1
            return cut
        }
    }

    private func pumpClientToServer(_ session: Session) {
        defer { finish(session) }
        var buffer: [UInt8] = []
        var startupDone = false
        var chunk = [UInt8](repeating: 0, count: 65_536)
        var executesSinceSync = 0
        while true {
            let count = chunk.withUnsafeMutableBytes { read(session.client, $0.baseAddress, $0.count) }
            if count <= 0 {
                shutdown(session.server, Int32(SHUT_WR))
                return
            }
            buffer += chunk[0..<count]
            // Forwards whole messages; stops at a `COMMIT` when a cut wants it dropped.
            var forwardable = 0
            var dropFrom: Int?
            while true {
                let headerSize = startupDone ? 5 : 4
                guard buffer.count - forwardable >= headerSize else { break }
                let lengthStart = forwardable + (startupDone ? 1 : 0)
                let length = Int(Self.int32(buffer, at: lengthStart))
                let end = lengthStart + length
                guard buffer.count >= end else { break }
                // A listener or relay session names itself in its startup parameters.
                if !startupDone,
                    ["application_name\0pgdatakit listener\0", "application_name\0pgdatakit relay\0"].contains(where:
                        String(decoding: buffer[(lengthStart + 4)..<end], as: UTF8.self).contains)
                {
                    lock.withLock { session.isListener = true }
                }
                if startupDone, Self.isCommit(buffer, type: buffer[forwardable], payload: (lengthStart + 4)..<end) {
                    if let cut = claim(for: session, { if case .commitNeverSent = $0 { return true } else { return false } }) {
                        lock.withLock {
                            session.droppingCommit = cut
                            session.answersBeforeCut = max(1, executesSinceSync)
                        }
                        dropFrom = forwardable
                        break
                    }
                }
                if startupDone, buffer[forwardable] == UInt8(ascii: "S") || buffer[forwardable] == UInt8(ascii: "Q") {
                    lock.withLock { if !session.isListener { state.roundTrips += 1 } }
                    executesSinceSync = 0
                } else if startupDone, buffer[forwardable] == UInt8(ascii: "E") {
                    executesSinceSync += 1
                }
                startupDone = true
                forwardable = end
            }
            let sendUpTo = dropFrom ?? forwardable
            if sendUpTo > 0 {
                guard Self.writeAll(session.server, buffer[0..<sendUpTo]) else { return }
            }
            if dropFrom != nil {
                // Everything from the `COMMIT` on is swallowed.
                while chunk.withUnsafeMutableBytes({ read(session.client, $0.baseAddress, $0.count) }) > 0 {}
                return
            }
            buffer.removeFirst(sendUpTo)
        }
    }

    private func pumpServerToClient(_ session: Session) {
        defer { finish(session) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        var clientCut = false
        // After a COMMIT's result was let through: the sync point's `ReadyForQuery` is
        // held back, so the client sees the result, then the termination, then the end.
        var holdingReadyForQuery = false
        // The answers seen of the pipeline whose `COMMIT` is dropped.
        var answeredBeforeCut = 0
        while true {
            let count = chunk.withUnsafeMutableBytes { read(session.server, $0.baseAddress, $0.count) }
            if count <= 0 {
                shutdown(session.client, Int32(SHUT_RDWR))
                return
            }
            if clientCut { continue }  // (a backend left idle: its output goes nowhere)
            buffer += chunk[0..<count]
            var out: [UInt8] = []
            var consumed = 0
            var cut: Cut?
            var terminateNow = false
            while buffer.count - consumed >= 5 {
                let type = buffer[consumed]
                let end = consumed + 1 + Int(Self.int32(buffer, at: consumed + 1))
                guard buffer.count >= end else { break }
                let message = buffer[consumed..<end]
                consumed = end
                if type == UInt8(ascii: "K"), message.count >= 13 {
                    let pid = Self.int32(buffer, at: message.startIndex + 5)
                    lock.withLock { session.pid = pid }
                }
                if holdingReadyForQuery && type == UInt8(ascii: "Z") { continue }
                if let (dropping, answers) = lock.withLock({ session.droppingCommit.map { ($0, session.answersBeforeCut) } }),
                    type == UInt8(ascii: "C") || type == UInt8(ascii: "E")
                {
                    out += message
                    answeredBeforeCut += 1
                    // The statement before the dropped COMMIT is answered (or one before it
                    // failed, which ends the pipeline): cut after it.
                    guard answeredBeforeCut >= answers || type == UInt8(ascii: "E") else { continue }
                    answeredBeforeCut = 0
                    cut = dropping
                    break
                }
                if type == UInt8(ascii: "C"), Array(message.dropFirst(5)) == Array("COMMIT\0".utf8),
                    let claimed = claim(for: session, { if case .commitNeverSent = $0 { return false } else { return true } })
                {
                    if case .afterCommitResult = claimed {
                        out += message
                        holdingReadyForQuery = true
                        terminateNow = true
                        continue
                    }
                    cut = claimed
                    break
                }
                out += message
            }
            buffer.removeFirst(consumed)
            if !out.isEmpty {
                guard Self.writeAll(session.client, out[...]) else { return }
            }
            if terminateNow {
                onCut(lock.withLock { session.pid })
                // The server closes the session now; should it not, the proxy does.
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(session.server, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            }
            guard let cut else { continue }
            if case .commitNeverSent(keepServerSession: true) = cut {
                shutdown(session.client, Int32(SHUT_RDWR))
                clientCut = true
                buffer = []
                continue
            }
            onCut(lock.withLock { session.pid })
            shutdown(session.client, Int32(SHUT_RDWR))
            shutdown(session.server, Int32(SHUT_RDWR))
            return
        }
    }

    // MARK: - Framing

    private static func int32(_ bytes: [UInt8], at offset: Int) -> Int32 {
        Int32(bitPattern: UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3]))
    }

    /// Whether a frontend message is a `Parse` or simple `Query` of `COMMIT`.
    private static func isCommit(_ bytes: [UInt8], type: UInt8, payload: Range<Int>) -> Bool {
        let commit = Array("COMMIT".utf8)
        if type == UInt8(ascii: "Q") {
            return Array(bytes[payload]).prefix(commit.count) == commit[...] && payload.count == commit.count + 1
        }
        guard type == UInt8(ascii: "P"), let nameEnd = bytes[payload].firstIndex(of: 0) else { return false }
        let query = bytes[(nameEnd + 1)..<payload.upperBound]
        guard let queryEnd = query.firstIndex(of: 0) else { return false }
        return Array(bytes[(nameEnd + 1)..<queryEnd]) == commit
    }

    private static func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let written = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 {
                if written < 0 && errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }
}

/// The proxy could not start.
struct ProxyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
