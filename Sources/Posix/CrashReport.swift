#if canImport(Glibc)
import Glibc
#endif

/// The Swift runtime's crash report. When stderr is not a terminal (the journal, a pipe) it
/// defaults to the "full" preset, which prints 16 bytes of memory at every register: a
/// register pointing at the API key would put part of it in the journal. The runtime reads
/// `SWIFT_BACKTRACE` once, at start, so the only way to change that for this process is to
/// set it and start again.
public enum CrashReport {
    public static let variable = "SWIFT_BACKTRACE"

    /// The setting to run with, or nil when `current` already says what to do with registers
    /// (a user who asks for register dumps gets them).
    public static func saferSetting(_ current: String?) -> String? {
        guard let current, !current.isEmpty else { return "registers=none" }
        if current.split(separator: ",").contains(where: { $0.drop(while: { $0 == " " }).hasPrefix("registers=") }) {
            return nil
        }
        return current + ",registers=none"
    }

    /// Re-executes this program with register dumps off, unless the environment already
    /// decides. Returns only if there was nothing to do or `execv` failed (then the process
    /// runs on as it is). Call it before opening anything: descriptors survive the exec.
    public static func restartWithoutRegisterDumps() {
        let current = getenv(variable).map { String(cString: $0) }
        guard let setting = saferSetting(current) else { return }
        // The program's own path, not /proc/self/exe: the process is named after the file
        // it executes, and `confabd` is what ps, pgrep and the journal should keep seeing.
        var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else { return }
        setenv(variable, setting, 1)
        execv(path, CommandLine.unsafeArgv)
        // Still here: exec failed. Put the variable back so children see what we were given.
        if let current { setenv(variable, current, 1) } else { unsetenv(variable) }
    }
}
