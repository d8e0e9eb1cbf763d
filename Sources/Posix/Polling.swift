#if canImport(Glibc)
import Glibc
#endif

extension UnixSocket {
    /// Sends all of `bytes` on a connected socket through short sends and EINTR, without
    /// SIGPIPE for a peer gone away (MSG_NOSIGNAL: EPIPE instead). The errno on failure.
    public static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        guard var pointer = bytes.baseAddress else { return nil }
        var left = bytes.count
        while left > 0 {
            let sent = send(fd, pointer, left, Int32(MSG_NOSIGNAL))
            if sent < 0 {
                if errno == EINTR { continue }
                return errno
            }
            pointer += sent
            left -= sent
        }
        return nil
    }
}

/// `poll(2)` over a few descriptors, blocking, for the client's single-threaded loops (the
/// daemon watches descriptors through libuv: `EventLoop.Poll`).
public enum BlockingPoll {
    /// One descriptor to watch: `readable` asks for POLLIN; with neither, only hang-up and
    /// errors are reported (always watched).
    public struct Watch: Sendable {
        public var fd: Int32
        public var readable: Bool
        /// Whether something happened on it in the last `wait`.
        public var ready = false
        public init(fd: Int32, readable: Bool = true) {
            self.fd = fd
            self.readable = readable
        }
    }

    /// Waits until one of `watches` is ready or `timeoutMilliseconds` pass (-1: no limit) and
    /// marks each; false when interrupted by a signal (EINTR), to be looked at by the caller.
    public static func wait(_ watches: inout [Watch], timeoutMilliseconds: Int32) throws(Errno) -> Bool {
        var fds = watches.map { pollfd(fd: $0.fd, events: $0.readable ? Int16(POLLIN) : 0, revents: 0) }
        let ready = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        if ready < 0 {
            if errno == EINTR { return false }
            throw Errno.current
        }
        for index in watches.indices { watches[index].ready = fds[index].revents != 0 }
        return true
    }
}
