#if canImport(Glibc)
import Glibc
#endif

/// An exclusive `flock(2)` on a file, held while the process lives (the kernel drops it on
/// exit, however the process ends). Two daemons starting at once both see no live socket;
/// only one can hold the lock, so only one goes on to replace and bind it.
public final class LockFile {
    public let path: String
    private let fd: Int32

    /// Takes the lock, creating the file (0600) if needed. Nil when another process holds
    /// it; throws for any other failure. The file is never removed: removing a lock file
    /// lets a third process lock a new file while the second still holds the old one.
    public static func acquire(_ path: String) throws(Errno) -> LockFile? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw Errno.current }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            close(fd)
            if code == EWOULDBLOCK { return nil }
            throw Errno(code)
        }
        return LockFile(path: path, fd: fd)
    }

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }
}
