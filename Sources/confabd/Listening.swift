import Broker
import EventLoop
#if canImport(Glibc)
import Glibc
#endif

struct StartupError: Error, CustomStringConvertible {
    let description: String
}

/// How confabd gets its listening socket: handed over by systemd, or bound by itself.
enum Listening {
    /// A socket passed by the service manager (`sd_listen_fds` semantics).
    struct Activated {
        let fileDescriptor: Int32
        /// Where it is bound, for the log; nil for an abstract or unnamed socket.
        let path: String?
    }

    /// The socket systemd passed (fd 3), if it passed any to this process. Sockets passed
    /// to another process (LISTEN_PID is not ours) are ignored, as sd_listen_fds does.
    /// Throws when fd 3 is not a listening Unix stream socket: serving anything else would
    /// fail later and less clearly.
    static func activated(environment: [String: String], logger: Logger) throws -> Activated? {
        guard let pidText = environment["LISTEN_PID"], let countText = environment["LISTEN_FDS"] else { return nil }
        // Children must not think the sockets were meant for them.
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard let pid = Int32(pidText), pid == getpid() else {
            logger.info("LISTEN_PID=\(pidText) is not this process; ignoring LISTEN_FDS")
            return nil
        }
        guard let count = Int32(countText), count >= 1, count <= 1024 else {
            logger.warning("LISTEN_FDS=\(countText) is not a usable number of sockets; ignoring it")
            return nil
        }
        let first: Int32 = 3
        for fd in first..<(first + count) { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        if count > 1 {
            // One socket is all confabd serves; the rest would only leak.
            for fd in (first + 1)..<(first + count) { close(fd) }
            logger.warning("systemd passed \(count) sockets; serving the first, closing the others")
        }
        guard isListeningUnixStream(first) else {
            throw StartupError(description: "fd 3 passed by systemd (LISTEN_FDS) is not a listening Unix stream socket; check ListenStream= in confabd.socket")
        }
        return Activated(fileDescriptor: first, path: boundPath(of: first))
    }

    private static func isListeningUnixStream(_ fd: Int32) -> Bool {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        return option(SO_DOMAIN) == AF_UNIX && option(SO_TYPE) == Int32(SOCK_STREAM.rawValue) && option(SO_ACCEPTCONN) == 1
    }

    private static func boundPath(of fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let used = min(raw.count, Int(length) - MemoryLayout<sa_family_t>.size)
            guard used > 0, raw[0] != 0 else { return nil }
            let bytes = raw.prefix(used).prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// A socket file this process created: enough to recognise it later, so that the one
    /// removed at exit is ours and not one a newer daemon has bound at the same path since.
    struct Bound {
        let path: String
        let device: UInt64
        let inode: UInt64

        /// Removes the socket file if it is still the one we bound.
        func removeIfOurs() {
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK,
                  UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode else { return }
            unlink(path)
        }
    }

    /// Makes the socket's directory (0700, ours, not a symlink), replaces a stale socket
    /// left by a dead daemon, refuses to steal a live one, and binds with mode 0600.
    @discardableResult
    static func bind(_ listener: UnixListener, path: String) throws -> Bound {
        guard path.utf8.count < 108 else {
            throw StartupError(description: "socket path is \(path.utf8.count) bytes; Unix sockets allow at most 107: \(path)")
        }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty { try makePrivateDirectory(directory) }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw StartupError(description: "\(path) exists and is not a socket; not touching it")
            }
            if answers(path) {
                throw StartupError(description: "another confabd is already running on \(path)")
            }
            unlink(path)
        }
        let previous = umask(0o177)
        defer { umask(previous) }
        do {
            try listener.bind(path: path)
        } catch {
            throw StartupError(description: "cannot bind \(path): \(error)")
        }
        chmod(path, 0o600)
        var created = stat()
        guard lstat(path, &created) == 0 else {
            throw StartupError(description: "\(path) vanished right after bind")
        }
        return Bound(path: path, device: UInt64(created.st_dev), inode: UInt64(created.st_ino))
    }

    static func makePrivateDirectory(_ path: String) throws {
        var current = ""
        let components = path.split(separator: "/")
        for (index, component) in components.enumerated() {
            current += "/" + component
            let last = index == components.count - 1
            if mkdir(current, last ? 0o700 : 0o755) != 0 && errno != EEXIST {
                throw StartupError(description: "cannot create \(current): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw StartupError(description: "\(path) is not a directory (or is a symlink); refusing to use it")
        }
        guard info.st_uid == getuid() else {
            throw StartupError(description: "\(path) belongs to uid \(info.st_uid), not to us; refusing to use it")
        }
        if info.st_mode & 0o077 != 0 { chmod(path, 0o700) }
    }

    /// True when something accepts connections on `path`.
    static func answers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return result == 0
    }
}

/// systemd's readiness protocol: datagrams to `$NOTIFY_SOCKET` (sd_notify(3)), and the
/// watchdog it may ask for with `$WATCHDOG_USEC` (sd_watchdog_enabled(3)).
struct Notifier {
    private let path: String?
    /// How often systemd wants `WATCHDOG=1`, in microseconds; nil when it does not.
    let watchdogMicroseconds: UInt64?

    init(environment: [String: String]) {
        path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        // A watchdog set up for another process (WATCHDOG_PID) is not ours to feed.
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0 {
            watchdogMicroseconds = usec
        } else {
            watchdogMicroseconds = nil
        }
        // Our children (there are none today) must not talk to systemd in our name.
        unsetenv("NOTIFY_SOCKET")
        unsetenv("WATCHDOG_USEC")
        unsetenv("WATCHDOG_PID")
    }

    var isActive: Bool { path != nil }

    /// The watchdog interval if there is somewhere to send the pings.
    var watchdog: UInt64? { isActive ? watchdogMicroseconds : nil }

    /// CLOCK_MONOTONIC in microseconds, as `RELOADING=1` wants it (systemd 253+).
    static var monotonicMicroseconds: UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    @discardableResult
    func send(_ state: String) -> Bool {
        guard let path, path.utf8.count < 108 else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        // An abstract socket is written with a leading "@" and sent with a leading NUL.
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let message = Array(state.utf8)
        while true {
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
                }
            }
            if sent < 0 && errno == EINTR { continue }
            return sent == message.count
        }
    }
}
