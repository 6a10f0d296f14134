import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The few Unix-domain socket and `poll` calls the notification relay needs, with errors
/// that say which call failed and why.
package enum LocalSocket {
    /// A system call that failed: its name, the path it concerned (if any) and `errno`'s text.
    package struct Failure: Error, CustomStringConvertible {
        var call: String
        var path: String?
        package var code: Int32

        package init(_ call: String, path: String? = nil, code: Int32 = errno) {
            self.call = call
            self.path = path
            self.code = code
        }

        package var description: String {
            "\(call)\(path.map { " \($0)" } ?? ""): \(String(cString: strerror(code)))"
        }
    }

    /// The longest path a `sockaddr_un` holds (with its terminating NUL).
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// A stream socket listening at `path` (an existing file there is replaced; the caller
    /// holds the lock that makes it the only one to do so), readable and writable by this
    /// user only.
    static func listen(at path: String, backlog: Int32 = 128) throws -> Int32 {
        let descriptor = try makeSocket()
        do {
            unlink(path)
            try withAddress(path) { address, length in
                guard bind(descriptor, address, length) == 0 else { throw Failure("bind", path: path) }
            }
            guard chmod(path, 0o600) == 0 else { throw Failure("chmod", path: path) }
            guard Glibc.listen(descriptor, backlog) == 0 else { throw Failure("listen", path: path) }
            try setNonBlocking(descriptor)
            return descriptor
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// A stream socket connected to `path`, or `nil` when nothing listens there (no file,
    /// or a file nobody accepts on).
    static func connect(to path: String) throws -> Int32? {
        let descriptor = try makeSocket()
        var failure: Int32 = 0
        do {
            try withAddress(path) { address, length in
                while Glibc.connect(descriptor, address, length) != 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
            }
        } catch {
            close(descriptor)
            throw error
        }
        switch failure {
        case 0:
            return descriptor
        case ENOENT, ECONNREFUSED:
            close(descriptor)
            return nil
        default:
            close(descriptor)
            throw Failure("connect", path: path, code: failure)
        }
    }

    /// Accepts a pending connection (non-blocking, close-on-exec); `nil` when none waits.
    static func accept(_ listening: Int32) throws -> Int32? {
        while true {
            let descriptor = Glibc.accept(listening, nil, nil)
            if descriptor >= 0 {
                do {
                    try setCloseOnExec(descriptor)
                    try setNonBlocking(descriptor)
                } catch {
                    close(descriptor)
                    throw error
                }
                return descriptor
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, ECONNABORTED: return nil
            default: throw Failure("accept")
            }
        }
    }

    static func setCloseOnExec(_ descriptor: Int32) throws {
        guard fcntl(descriptor, F_SETFD, FD_CLOEXEC) == 0 else { throw Failure("fcntl") }
    }

    /// A pipe whose ends are closed on exec: (read end, write end).
    static func pipe() throws -> (Int32, Int32) {
        var descriptors: [Int32] = [-1, -1]
        guard Glibc.pipe(&descriptors) == 0 else { throw Failure("pipe") }
        for descriptor in descriptors { try? setCloseOnExec(descriptor) }
        return (descriptors[0], descriptors[1])
    }

    static func setNonBlocking(_ descriptor: Int32) throws {
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { throw Failure("fcntl") }
    }

    /// Writes what it can of `bytes` from `offset` without blocking; the new offset.
    /// Throws when the peer is gone.
    static func send(_ descriptor: Int32, _ bytes: [UInt8], from offset: Int) throws -> Int {
        var offset = offset
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                Glibc.send(
                    descriptor, buffer.baseAddress.map { $0 + offset }, bytes.count - offset,
                    Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                break
            } else {
                throw Failure("send")
            }
        }
        return offset
    }

    /// Reads what has arrived without blocking and appends it to `buffer`, through
    /// `scratch`: the caller's, kept from read to read, so that a read neither allocates
    /// nor clears memory (a fresh 64 KiB array per read did both: a follower of the relay
    /// read once per notification). One read takes at most `scratch.count` bytes; an empty
    /// scratch gets `receiveSize` bytes first.
    ///
    /// - Returns: the count of bytes appended (`0` when nothing waits), `nil` at end of
    ///   file.
    /// - Throws: `Failure` on a broken socket.
    static func receive(_ descriptor: Int32, appendingTo buffer: inout [UInt8], scratch: inout [UInt8]) throws -> Int? {
        if scratch.isEmpty { scratch = [UInt8](repeating: 0, count: receiveSize) }
        while true {
            let count = scratch.withUnsafeMutableBytes {
                Glibc.recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            if count > 0 {
                buffer.append(contentsOf: scratch[..<count])
                return count
            }
            if count == 0 { return nil }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return 0
            default: throw Failure("recv")
            }
        }
    }

    /// The size of the scratch buffer `receive(_:appendingTo:scratch:)` gives an empty one.
    static let receiveSize = 65_536

    /// Waits until one of `descriptors` is ready for what its events ask, or `timeout`
    /// passes; returns each descriptor's returned events (all 0 on timeout).
    package static func poll(_ descriptors: [(descriptor: Int32, events: Int16)], timeout: Duration) throws -> [Int16] {
        var entries = descriptors.map { pollfd(fd: $0.descriptor, events: $0.events, revents: 0) }
        let milliseconds = Int32(clamping: max(0, timeout.milliseconds))
        while true {
            let result = Glibc.poll(&entries, nfds_t(entries.count), milliseconds)
            if result >= 0 { return entries.map(\.revents) }
            if errno != EINTR { throw Failure("poll") }
        }
    }

    private static func makeSocket() throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure("socket") }
        return descriptor
    }

    private static func withAddress(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> Void
    ) throws {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else {
            throw Failure("socket path", path: path, code: ENAMETOOLONG)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { destination in
            for (index, byte) in bytes.enumerated() { destination[index] = byte }
        }
        try withUnsafePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }
}
