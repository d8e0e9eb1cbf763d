import ConfabLog
import ConfabProtocol
import DaemonSettings
import EventLoop
import MCP
import ServiceSettings
import Tools

/// The configured MCP servers as the daemon runs them, by name. A server starts when a
/// conversation first offers its tools and keeps running for every conversation after; a
/// reload replaces the servers whose settings changed and stops those no longer configured.
final class MCPServers {
    private let loop: Loop
    private let launcher: [String]
    private let settings: CurrentSettings
    private(set) var byName: [String: MCPServer] = [:]
    /// Servers being stopped (replaced or removed by a reload, or at shutdown).
    private var stopping: [ObjectIdentifier: MCPServer] = [:]
    /// The HTTP client of servers over HTTP, made with the first of them.
    private var http: MCPHTTPClient?

    init(loop: Loop, launcher: [String], settings: CurrentSettings) {
        self.loop = loop
        self.launcher = launcher
        self.settings = settings
        update()
    }

    /// Takes the servers of the settings in force.
    func update() {
        let configured = settings.value.mcpServers
        for (name, server) in byName where !configured.contains(server.settings) {
            byName[name] = nil
            settings.logger.notice("mcp=\(name) no longer configured as it runs: stopping it")
            stop(server) {}
        }
        // A server kept as it runs that was given up on may be tried again: the reload is the
        // user's word that something changed.
        for server in byName.values where server.hasGivenUp {
            server.forgetFailures()
            if server.settings.start == .always { server.whenReady { _ in } }
        }
        for entry in configured where byName[entry.name] == nil {
            if entry.http != nil, http == nil { http = MCPHTTPClient(loop: loop) }
            let server = MCPServer(settings: entry, loop: loop, launcher: launcher, http: entry.http == nil ? nil : http) { [unowned self] level, text in
                settings.logger.log(level, "mcp=\(entry.name) \(text)")
            }
            byName[entry.name] = server
            // `start = "always"`: when the daemon starts, or when a reload adds it.
            if entry.start == .always { server.whenReady { _ in } }
        }
    }

    private func stop(_ server: MCPServer, then: @escaping () -> Void) {
        let key = ObjectIdentifier(server)
        stopping[key] = server
        server.stop { [unowned self] in
            stopping[key] = nil
            then()
        }
    }

    /// Shutdown: every server is stopped (stdin closed, SIGTERM, SIGKILL: bounded by the
    /// grace periods; a server over HTTP: its session ended, as long at most); `then` runs once
    /// all have exited.
    func stopAll(then allStopped: @escaping () -> Void) {
        let all = Array(byName.values) + Array(stopping.values)
        byName = [:]
        let then = { [unowned self] in
            http?.close()
            http = nil
            allStopped()
        }
        var left = all.count
        guard left > 0 else { return then() }
        for server in all {
            let key = ObjectIdentifier(server)
            stopping[key] = server
            server.stop { [unowned self] in
                stopping[key] = nil
                left -= 1
                if left == 0 { then() }
            }
        }
    }
}

/// A tool a conversation offers the model: an HTTP tool, or a tool of an MCP server under
/// its model-facing name.
struct OfferedTool {
    enum Source {
        case http(ToolDefinition)
        case mcp(MCPServer, tool: MCPTool)
    }
    var name: String
    var description: String
    var parameters: JSON
    var approval: ToolApproval
    var source: Source

    /// Whether a call of an MCP server's `tool` waits for a person's yes: its `tool_approval`
    /// (or `autoApprove` entry) over the server's `approval`. The one decision: a call waits
    /// by it, and `tools.list` shows it.
    static func approval(of tool: String, on server: MCPServerSettings) -> ToolApproval {
        server.approval(for: tool) == .always ? .always : .never
    }

    /// Checks the model's arguments: an HTTP tool's against its schema and URL; an MCP tool's
    /// are a JSON object, checked against its schema where the schema is one this daemon can
    /// check, and by the server otherwise (a `pattern` that cannot run in linear time, such as
    /// one with a backreference, is left to the server, the rest of the schema checked here).
    func validate(arguments: String) -> Result<JSON, ToolArgumentError> {
        switch source {
        case .http(let definition):
            return definition.validate(arguments: arguments)
        case .mcp(_, let tool):
            let value: JSON
            switch ToolDefinition.parse(arguments: arguments) {
            case .success(let parsed): value = parsed
            case .failure(let error): return .failure(error)
            }
            if ToolSchema.problem(in: tool.inputSchema, unsupportedPatterns: .leftToServer) == nil, let problem = ToolSchema.validate(value, against: tool.inputSchema) {
                return .failure(ToolArgumentError(message: problem))
            }
            return .success(value)
        }
    }
}
