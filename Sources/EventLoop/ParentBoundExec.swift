import CLibUV
import Glibc

/// Runs a program that must not outlive the process that started it. The daemon starts each
/// MCP server through its own executable in this mode (`confabd --run-bound-to PID --
/// PROGRAM ARGS…`): the kernel's parent-death signal (PR_SET_PDEATHSIG, SIGKILL) is set,
/// every descriptor above 2 is closed, then the program is executed in place, keeping the
/// signal. Should the daemon die in any way, kill -9
/// included, the kernel ends the server at once: its process group and session of its own
/// shield it from a terminal's signals, and nothing else would reach it. libuv's spawn has no
/// hook between fork and exec, hence the trip through this executable.
public enum ParentBoundExec {
    /// The first argument that selects this mode.
    public static let flag = "--run-bound-to"

    /// This process's executable, for the launcher prefix (nil when /proc cannot say).
    public static var executablePath: String? {
        var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: path[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The prefix to start a program with so that it ends with this process.
    public static func launcher() -> [String]? {
        executablePath.map { [$0, flag, String(getpid()), "--"] }
    }

    /// When `arguments` (the whole command line) selects this mode, sets the parent-death
    /// signal and executes the program; never returns then (exit status 127 when the program
    /// cannot be run, or when the parent is already gone). Returns otherwise.
    public static func runIfAsked(_ arguments: [String]) {
        guard arguments.count >= 5, arguments[1] == flag, arguments[3] == "--", let parent = pid_t(arguments[2]) else { return }
        let program = Array(arguments[4...])
        guard confab_set_parent_death_signal(SIGKILL) == 0 else { fail("cannot set the parent-death signal", errno) }
        // The parent may have died before the signal was set: then nobody would send it.
        guard getppid() == parent else { _exit(127) }
        // The program gets its three standard streams and nothing else of the daemon: no
        // descriptor libcurl or anything else opened without close-on-exec (its wake-up socket
        // pair, connections to model servers) reaches a server.
        guard confab_close_descriptors_from(3) == 0 else { fail("cannot close the descriptors the program must not inherit", errno) }
        let argv = program.map { strdup($0) } + [nil]
        execvp(program[0], argv)
        fail("cannot run \(program[0])", errno)
    }

    private static func fail(_ what: String, _ code: Int32) -> Never {
        let text = "confabd: \(what): \(String(cString: strerror(code)))\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
        _exit(127)
    }
}
