#if canImport(Glibc)
import Glibc
#endif

/// Running another program in the foreground (an editor) and waiting for it.
public enum Spawn {
    /// Runs `arguments[0]` (found on PATH) with our terminal and environment; its exit
    /// status, or 128 + the signal that ended it, or 127 when it could not start. Signals
    /// we catch are reset to their defaults in the child, as exec does.
    public static func wait(_ arguments: [String]) -> Int32 {
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawnp(&pid, arguments[0], nil, nil, argv, environ) == 0 else { return 127 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return 127 }
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out: Swift does not import the macros.
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}
