import ConfabLog
import Broker
import EventLoop
import Posix
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
        guard let pid = Int32(pidText), pid == ThisProcess.id else {
            logger.info("LISTEN_PID=\(pidText) is not this process; ignoring LISTEN_FDS")
            return nil
        }
        guard let count = Int32(countText), count >= 1, count <= 1024 else {
            logger.warning("LISTEN_FDS=\(countText) is not a usable number of sockets; ignoring it")
            return nil
        }
        let first: Int32 = 3
        for fd in first..<(first + count) { Files.setCloseOnExec(fd) }
        if count > 1 {
            // One socket is all confabd serves; the rest would only leak.
            for fd in (first + 1)..<(first + count) { Files.close(fd) }
            logger.warning("systemd passed \(count) sockets; serving the first, closing the others")
        }
        guard UnixSocket.isListeningStream(first) else {
            throw StartupError(description: "fd 3 passed by systemd (LISTEN_FDS) is not a listening Unix stream socket; check ListenStream= in confabd.socket")
        }
        return Activated(fileDescriptor: first, path: UnixSocket.boundPath(of: first))
    }

    /// A socket file this process created: enough to recognise it later, so that the one
    /// removed at exit is ours and not one a newer daemon has bound at the same path since.
    struct Bound {
        let path: String
        let device: UInt64
        let inode: UInt64
        /// Held until exit: while it is, no other confabd replaces this socket.
        let lock: LockFile

        /// Removes the socket file if it is still the one we bound.
        func removeIfOurs() {
            guard let info = try? Files.status(path: path, followingLinks: false), info.kind == .socket,
                  info.device == device, info.inode == inode else { return }
            try? Files.remove(path)
        }
    }

    /// Makes the socket's directory (0700, ours, not a symlink), replaces a stale socket
    /// left by a dead daemon, refuses to steal a live one, and binds with mode 0600.
    @discardableResult
    static func bind(_ listener: UnixListener, path: String) throws -> Bound {
        guard path.utf8.count <= UnixSocket.maxPathBytes else {
            throw StartupError(description: "socket path is \(path.utf8.count) bytes; Unix sockets allow at most \(UnixSocket.maxPathBytes): \(path)")
        }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty { try makePrivateDirectory(directory) }
        let lock: LockFile
        do {
            guard let held = try LockFile.acquire(path + ".lock") else {
                throw StartupError(description: "another confabd is already running on \(path) (it holds \(path).lock)")
            }
            lock = held
        } catch let error as Errno {
            throw StartupError(description: "cannot lock \(path).lock: \(error)")
        }
        if let info = try? Files.status(path: path, followingLinks: false) {
            guard info.kind == .socket else {
                throw StartupError(description: "\(path) exists and is not a socket; not touching it")
            }
            if UnixSocket.answers(path) {
                throw StartupError(description: "another confabd is already running on \(path)")
            }
            try? Files.remove(path)
        }
        do {
            try Files.withCreationMask(0o177) { try listener.bind(path: path) }
        } catch {
            throw StartupError(description: "cannot bind \(path): \(error)")
        }
        try? Files.setPermissions(path, 0o600)
        guard let created = try? Files.status(path: path, followingLinks: false) else {
            throw StartupError(description: "\(path) vanished right after bind")
        }
        return Bound(path: path, device: created.device, inode: created.inode, lock: lock)
    }

    static func makePrivateDirectory(_ path: String) throws {
        do {
            try Files.makeDirectories(path, mode: 0o700, parentMode: 0o755)
        } catch {
            throw StartupError(description: "cannot create \(error.path): \(error.errno)")
        }
        guard let info = try? Files.status(path: path, followingLinks: false), info.kind == .directory else {
            throw StartupError(description: "\(path) is not a directory (or is a symlink); refusing to use it")
        }
        guard info.owner == getuid() else {
            throw StartupError(description: "\(path) belongs to uid \(info.owner), not to us; refusing to use it")
        }
        // A sticky directory open to all (/tmp) is shared by design: the socket's own 0600
        // mode protects it there, and making the directory private would lock out every
        // other user of the machine.
        if info.permissions & 0o077 != 0 && !info.isSticky { try? Files.setPermissions(path, 0o700) }
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
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == ThisProcess.id } ?? true
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

    /// How much longer each loading report asks systemd to wait for READY=1: a few reports'
    /// worth, so a stuck load still times out soon after it stops reporting.
    static let startExtension: UInt64 = 10_000_000

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
        guard let path else { return false }
        return UnixSocket.sendDatagram(Array(state.utf8), to: path)
    }
}
