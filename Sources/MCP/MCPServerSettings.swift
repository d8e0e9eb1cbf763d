/// One `[mcp.NAME]` table: a local MCP server the daemon runs over stdio.
public struct MCPServerSettings: Sendable, Equatable {
    public enum Approval: String, Sendable, Equatable { case always, never }

    public var name: String
    public var command: String
    public var arguments: [String]
    /// Variables given to the server beyond the few passed from the daemon's own
    /// environment (`passedVariables`); nothing else of the daemon's environment is.
    public var environment: [String: String]
    public var workingDirectory: String?
    public var approval: Approval
    /// The tools offered, by the server's names; nil: all it lists.
    public var tools: [String]?
    public var timeoutSeconds: Int
    public var startupTimeoutSeconds: Int

    public init(name: String, command: String, arguments: [String] = [], environment: [String: String] = [:],
                workingDirectory: String? = nil, approval: Approval = .always, tools: [String]? = nil,
                timeoutSeconds: Int = 60, startupTimeoutSeconds: Int = 30) {
        self.name = name
        self.command = command
        self.arguments = arguments
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.approval = approval
        self.tools = tools
        self.timeoutSeconds = timeoutSeconds
        self.startupTimeoutSeconds = startupTimeoutSeconds
    }

    /// Whether a variable of the daemon's environment is passed on: PATH, HOME, LANG and
    /// the XDG base directories, which a program needs to find itself and its files; never
    /// a secret the daemon was started with.
    public static func isPassed(_ variable: String) -> Bool {
        ["PATH", "HOME", "LANG"].contains(variable) || variable.hasPrefix("XDG_")
    }

    /// The server's whole environment: the passed variables of `daemonEnvironment`, then
    /// the configured ones over them.
    public func childEnvironment(daemonEnvironment: [String: String]) -> [String: String] {
        daemonEnvironment.filter { Self.isPassed($0.key) }.merging(environment) { _, configured in configured }
    }
}
