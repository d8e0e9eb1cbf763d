#if canImport(Glibc)
import Glibc
#endif

/// Where confab's files live, by the XDG base directory rules. Daemon and client resolve
/// the socket the same way so they meet without configuration.
public struct ConfabPaths: Sendable {
    private let variable: @Sendable (String) -> String?
    /// Where a home is found when `$HOME` is unset.
    private let homeOf: @Sendable (UInt32) -> String?

    /// The daemon's paths: without `$HOME`, the user database (NSS) gives the home.
    public init(environment: [String: String]) {
        variable = { environment[$0] }
        homeOf = { UserAccount.homeDirectory(of: $0) }
    }

    private init(variable: @escaping @Sendable (String) -> String?, homeOf: @escaping @Sendable (UInt32) -> String?) {
        self.variable = variable
        self.homeOf = homeOf
    }

    /// A client's paths, reading each variable with getenv when a path needs it: a client's
    /// cold start should not copy the environment to find one socket. Without `$HOME` the
    /// home comes from /etc/passwd read as a file: the static release client must make no
    /// NSS lookup (the modules it would load crash a static executable; see `PasswdFile`).
    public static func current() -> ConfabPaths {
        ConfabPaths(variable: { name in getenv(name).map { String(cString: $0) } },
                    homeOf: { PasswdFile.homeDirectory(of: $0) })
    }

    private var home: String {
        if let home = variable("HOME"), !home.isEmpty { return home }
        if let directory = homeOf(getuid()) { return directory }
        return "/"
    }

    private func xdg(_ variable: String, default fallback: String) -> String {
        // The spec says relative values are invalid and must be ignored.
        if let value = self.variable(variable), value.hasPrefix("/") { return value }
        return home + "/" + fallback
    }

    /// `$XDG_RUNTIME_DIR/confab`, or `/tmp/confab-$UID` when there is no runtime dir.
    public var runtimeDirectory: String {
        if let runtime = variable("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") { return runtime + "/confab" }
        return "/tmp/confab-\(getuid())"
    }

    /// `CONFAB_SOCKET` wins; otherwise `<runtime dir>/confabd.sock`.
    public var socket: String {
        if let socket = variable("CONFAB_SOCKET"), !socket.isEmpty { return socket }
        return runtimeDirectory + "/confabd.sock"
    }

    public var dataDirectory: String { xdg("XDG_DATA_HOME", default: ".local/share") + "/confab" }
    public var configFile: String { xdg("XDG_CONFIG_HOME", default: ".config") + "/confab/config.toml" }
}
