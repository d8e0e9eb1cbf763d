import EventLoop
#if canImport(Glibc)
import Glibc
#endif

struct StartupError: Error, CustomStringConvertible {
    let description: String
}

/// How confabd gets its listening socket: handed over by systemd, or bound by itself.
enum Listening {
    /// The socket systemd passed (fd 3), if it passed one to this process.
    static func activated(environment: [String: String]) -> Int32? {
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
              let count = environment["LISTEN_FDS"].flatMap(Int.init), count >= 1 else { return nil }
        // Children must not think the sockets were meant for them.
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        let fd: Int32 = 3
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }

    /// Makes the socket's directory (0700, ours, not a symlink), replaces a stale socket
    /// left by a dead daemon, refuses to steal a live one, and binds with mode 0600.
    static func bind(_ listener: UnixListener, path: String) throws {
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

/// systemd's readiness protocol: datagrams to `$NOTIFY_SOCKET`.
struct Notifier {
    private let path: String?

    init(environment: [String: String]) {
        path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        unsetenv("NOTIFY_SOCKET")
    }

    var isActive: Bool { path != nil }

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
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
            }
        }
        return sent == message.count
    }
}
