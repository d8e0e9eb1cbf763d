import ConfabProtocol

/// One `[mcp.NAME]` table: a local MCP server the daemon runs over stdio, or one it reaches
/// over Streamable HTTP.
public struct MCPServerSettings: Sendable, Equatable {
    /// When the daemon starts the server: when a conversation first offers its tools, or at
    /// once (when the daemon starts, or when a reload adds it).
    public enum Start: String, Sendable, Equatable { case onDemand = "on_demand", always }

    public var name: String
    public var command: String
    public var arguments: [String]
    /// Variables the config gives the server (`env`).
    public var environment: [String: String]
    /// The few variables of the daemon's own environment passed on (`isPassed`), taken when
    /// the config is read; nothing else of it reaches the server.
    public var passedEnvironment: [String: String]
    public var workingDirectory: String?
    public var approval: ToolApproval
    /// The tools offered, by the server's names; nil: all it lists.
    public var tools: [String]?
    public var timeoutSeconds: Int
    public var startupTimeoutSeconds: Int
    /// A server reached over Streamable HTTP (`url`) rather than run (`command`, then empty).
    public var http: MCPHTTPEndpoint?
    public var start: Start = .onDemand
    /// Approval for single tools (the server's names) over `approval`.
    public var toolApproval: [String: ToolApproval] = [:]

    public init(name: String, command: String, arguments: [String] = [], environment: [String: String] = [:],
                passedEnvironment: [String: String] = [:], workingDirectory: String? = nil, approval: ToolApproval = .always, tools: [String]? = nil,
                timeoutSeconds: Int = 60, startupTimeoutSeconds: Int = 30) {
        self.name = name
        self.command = command
        self.arguments = arguments
        self.environment = environment
        self.passedEnvironment = passedEnvironment
        self.workingDirectory = workingDirectory
        self.approval = approval
        self.tools = tools
        self.timeoutSeconds = timeoutSeconds
        self.startupTimeoutSeconds = startupTimeoutSeconds
    }

    /// Whether a call of `tool` waits for a person's yes.
    public func approval(for tool: String) -> ToolApproval { toolApproval[tool] ?? approval }

    /// The tools named in `toolApproval` or `tools` that `listed` (the server's own list) lacks.
    public func namedToolsMissing(from listed: [String]) -> [String] {
        let known = Set(listed)
        let named = Set(toolApproval.keys).union(tools ?? [])
        return named.subtracting(known).sorted()
    }

    /// Whether a variable of the daemon's environment is passed on: PATH, HOME, LANG and
    /// the XDG base directories, which a program needs to find itself and its files; never
    /// a secret the daemon was started with.
    public static func isPassed(_ variable: String) -> Bool {
        ["PATH", "HOME", "LANG"].contains(variable) || variable.hasPrefix("XDG_")
    }

    /// The variables of `daemonEnvironment` that are passed on.
    public static func passed(from daemonEnvironment: [String: String]) -> [String: String] {
        daemonEnvironment.filter { isPassed($0.key) }
    }

    /// The server's whole environment: the passed variables, the configured ones over them.
    public var childEnvironment: [String: String] {
        passedEnvironment.merging(environment) { _, configured in configured }
    }
}
