#if canImport(Glibc)
import Glibc
#endif

/// The few calls on descriptors, modes and this process that the browser gateway and its
/// command line need, so that they stay clear of C.
public enum Descriptor {
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// One read into `buffer` (retried after EINTR): the count, 0 at end of stream.
    public static func readSome(_ fd: Int32, into buffer: inout [UInt8]) throws(Errno) -> Int {
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count >= 0 { return count }
            if errno != EINTR { throw Errno.current }
        }
    }
}

extension Files {
    /// chmod(2); false when it failed.
    @discardableResult
    public static func setMode(_ path: String, _ mode: mode_t) -> Bool {
        chmod(path, mode) == 0
    }

    public static func isExecutable(_ path: String) -> Bool {
        access(path, X_OK) == 0
    }
}

extension ProcessEnvironment {
    /// One variable, read with getenv(3).
    public static func variable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    public static var userID: UInt32 { getuid() }
}
