#if canImport(Glibc)
import Glibc
#endif

/// This process and the system it runs on, as the kernel tells them.
public enum ThisProcess {
    /// The process id (a temporary file's name carries it, so two writers never share one).
    public static var id: Int32 { getpid() }

    /// The kernel's name (`Linux`), from uname(2); nil when the call fails.
    public static func kernelName() -> String? {
        var names = utsname()
        guard uname(&names) == 0 else { return nil }
        return withUnsafeBytes(of: names.sysname) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

/// The terminal a descriptor is open on.
public enum TerminalDevice {
    /// Its path (`/dev/pts/3`); nil when `fd` is no terminal.
    public static func path(of fd: Int32) -> String? {
        guard let path = ttyname(fd) else { return nil }
        return String(cString: path)
    }

    /// Throws away what was typed on it and not read yet. A failure leaves the typing where it
    /// was, which is all that could happen anyway: there is nothing to report.
    public static func discardTypedInput(_ fd: Int32) {
        _ = tcflush(fd, TCIFLUSH)
    }
}
