#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open descriptors. confabd keeps one descriptor per conversation
/// log, and the usual soft limit (1024) is far below the hard one (systemd gives services
/// 524288), so it raises the soft limit as far as it is allowed to.
public enum OpenFileLimit {
    /// The soft limit now.
    public static var current: UInt64 {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return UInt64(limit.rlim_cur)
    }

    /// Raises the soft limit to the hard one (at most 2^20). Returns the soft limit before and after.
    @discardableResult
    public static func raiseToHardLimit() -> (before: UInt64, after: UInt64) {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (0, 0) }
        let before = UInt64(limit.rlim_cur)
        // An unlimited hard limit still stops at the kernel's nr_open (1048576 by default).
        let target = min(limit.rlim_max, rlim_t(1 << 20))
        guard limit.rlim_cur < target else { return (before, before) }
        limit.rlim_cur = target
        guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (before, before) }
        return (before, UInt64(limit.rlim_cur))
    }
}
