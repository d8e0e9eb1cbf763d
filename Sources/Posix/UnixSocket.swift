#if canImport(Glibc)
import Glibc
#endif

/// The socket calls confab makes outside libuv: connecting a client, probing a socket
/// path, looking at a socket systemd handed over, and sd_notify's datagrams. They all need
/// a C `sockaddr_un`, so they live here and nowhere else.
public enum UnixSocket {
    public enum Kind: Sendable {
        case stream, datagram

        var type: Int32 { self == .stream ? Int32(SOCK_STREAM.rawValue) : Int32(SOCK_DGRAM.rawValue) }
    }

    /// `sun_path` holds 108 bytes, one of them the terminating NUL.
    public static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// A new close-on-exec socket connected to `path`. A path starting with "@" names an
    /// abstract socket (as `$NOTIFY_SOCKET` may). ENAMETOOLONG for a path that cannot fit,
    /// ENOENT for an empty one.
    public static func connect(to path: String, kind: Kind = .stream) throws(Errno) -> Int32 {
        var bytes = Array(path.utf8)
        guard !bytes.isEmpty else { throw Errno(ENOENT) }
        guard bytes.count <= maxPathBytes, !bytes.contains(0) else { throw Errno(ENAMETOOLONG) }
        let abstract = bytes[0] == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes) }
        // An abstract name is exactly its bytes; a path also counts its terminating NUL.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))

        let fd = socket(AF_UNIX, kind.type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Errno.current }
        while true {
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
            }
            if status == 0 { return fd }
            let code = errno
            if code == EINTR { continue }
            // An interrupted connect goes on in the background; EISCONN says it finished.
            if code == EISCONN { return fd }
            close(fd)
            throw Errno(code)
        }
    }

    /// True when something accepts stream connections on `path` right now.
    public static func answers(_ path: String) -> Bool {
        guard let fd = try? connect(to: path) else { return false }
        close(fd)
        return true
    }

    /// Sends one datagram to the socket at `path` (sd_notify's transport). True when the
    /// whole message went out.
    @discardableResult
    public static func sendDatagram(_ message: [UInt8], to path: String) -> Bool {
        guard let fd = try? connect(to: path, kind: .datagram) else { return false }
        defer { close(fd) }
        while true {
            let sent = message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            return sent == message.count
        }
    }

    /// True when `fd` is a Unix stream socket in the listening state.
    public static func isListeningStream(_ fd: Int32) -> Bool {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        return option(SO_DOMAIN) == AF_UNIX && option(SO_TYPE) == Int32(SOCK_STREAM.rawValue) && option(SO_ACCEPTCONN) == 1
    }

    /// Who is on the other end of a connected Unix socket, as the kernel recorded it when
    /// the connection was made (SO_PEERCRED), never as the peer claims.
    public struct PeerCredentials: Sendable, Equatable {
        public var pid: Int32
        public var uid: UInt32
        public var gid: UInt32

        public init(pid: Int32, uid: UInt32, gid: UInt32) {
            self.pid = pid
            self.uid = uid
            self.gid = gid
        }
    }

    /// The peer's credentials; the errno when the kernel gives none (not a Unix socket).
    public static func peerCredentials(of fd: Int32) throws(Errno) -> PeerCredentials {
        // Glibc's `struct ucred` is hidden behind _GNU_SOURCE; the kernel's layout is fixed
        // (pid_t, uid_t, gid_t), and so is this one, field for field.
        var credentials = PeerCredentials(pid: 0, uid: 0, gid: 0)
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        let status = withUnsafeMutablePointer(to: &credentials) {
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, $0, &length)
        }
        guard status == 0 else { throw Errno.current }
        guard length == socklen_t(MemoryLayout<PeerCredentials>.size) else { throw Errno(EINVAL) }
        return credentials
    }

    /// The path `fd` is bound to; nil for an abstract or unnamed socket.
    public static func boundPath(of fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard status == 0 else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let used = min(raw.count, Int(length) - MemoryLayout<sa_family_t>.size)
            guard used > 0, raw[0] != 0 else { return nil }
            return String(decoding: raw.prefix(used).prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}

/// Who a uid is, from the user database.
public enum UserAccount {
    /// The login name of `uid`, or nil when the user database does not know it.
    public static func login(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return nil
        }
        return String(cString: name)
    }

    /// The home directory the user database gives `uid`, or nil when it knows none.
    public static func homeDirectory(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let directory = entry.pw_dir else {
            return nil
        }
        return String(cString: directory)
    }

    /// The uid of the login `name`, or nil when the user database does not know it.
    public static func uid(of name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard !name.isEmpty, !name.utf8.contains(0), getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else {
            return nil
        }
        return entry.pw_uid
    }

    /// The uid the kernel shows for a user it cannot map into this user namespace
    /// (`/proc/sys/kernel/overflowuid`, 65534 unless changed). Under systemd's
    /// `PrivateUsers=yes` every other user arrives as this uid.
    public static var overflowUID: UInt32 {
        guard let bytes = try? Files.readAll(path: "/proc/sys/kernel/overflowuid", limit: 64),
              let uid = UInt32(String(decoding: bytes.prefix { $0 != 0x0A }, as: UTF8.self)) else {
            return 65534
        }
        return uid
    }
}

/// The local user database read as a plain file, `/etc/passwd`. glibc's own lookups
/// (getpwuid and friends) load the NSS modules nsswitch.conf names (systemd, sss, ldap) with
/// dlopen, which a static executable cannot do safely: for a user those modules serve, the
/// static client crashed inside libnss_systemd. So the client asks the file alone, and for
/// a user it does not list makes do with the uid (and `$USER` for itself).
public enum PasswdFile {
    public static let defaultPath = "/etc/passwd"

    /// The login of `uid`, if the file lists it.
    public static func login(of uid: UInt32, path: String = defaultPath) -> String? {
        entries(path: path).first { $0.uid == uid }?.login
    }

    /// The uid of `login`, if the file lists it.
    public static func uid(of login: String, path: String = defaultPath) -> UInt32? {
        entries(path: path).first { $0.login == login }?.uid
    }

    /// The home directory the file gives `uid`, if it lists one (absolute).
    public static func homeDirectory(of uid: UInt32, path: String = defaultPath) -> String? {
        entries(path: path).first { $0.uid == uid }?.home
    }

    /// `login:password:uid:gid:gecos:home:shell` lines; comments, NIS `+`/`-` entries and
    /// malformed lines skipped. `home` is nil unless the line gives an absolute path.
    public static func entries(in text: [UInt8]) -> [(login: String, uid: UInt32, home: String?)] {
        var found: [(login: String, uid: UInt32, home: String?)] = []
        for line in text.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: ":"), maxSplits: 6, omittingEmptySubsequences: false)
            guard fields.count >= 3, let first = fields[0].first, first != UInt8(ascii: "#"), first != UInt8(ascii: "+"),
                  first != UInt8(ascii: "-"), let uid = UInt32(String(decoding: fields[2], as: UTF8.self)) else { continue }
            let home = fields.count > 5 && fields[5].first == UInt8(ascii: "/") ? String(decoding: fields[5], as: UTF8.self) : nil
            found.append((String(decoding: fields[0], as: UTF8.self), uid, home))
        }
        return found
    }

    private static func entries(path: String) -> [(login: String, uid: UInt32, home: String?)] {
        guard let bytes = try? Files.readAll(path: path, limit: 16 << 20) else { return [] }
        return entries(in: bytes)
    }
}
