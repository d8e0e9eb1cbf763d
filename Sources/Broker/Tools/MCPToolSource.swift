import ConfabProtocol
import MCP
import ServiceSettings
import Tools

/// The configured MCP servers as a tool source: each server a name-space (`SERVER.TOOL` in a
/// profile, `SERVER__TOOL` for the model), ready once its process (or HTTP session) has
/// listed its tools. What runs the servers is `MCPServers.swift`.
extension MCPServers: ToolSource {
    var kind: ToolSourceKind { .mcp }

    /// An entry whose name-space is a configured server's name.
    func serves(_ entry: QualifiedToolName) -> Bool { byName[entry.space] != nil }

    /// The servers the entries name (nil: all), in the config's order.
    private func servers(for entries: [QualifiedToolName]?) -> [MCPServer] {
        let all = settings.value.mcpServers.compactMap { byName[$0.name] }
        guard let entries else { return all }
        let named = Set(entries.map(\.space))
        return all.filter { named.contains($0.settings.name) }
    }

    /// Each entry's tools in the entries' order (nil: every server's, in the config's order):
    /// a ready server's as it lists them; one not ready, with `includingUnready`, the names
    /// its `tools` filter (or the entry) gives. Descriptions are the server's words: redacted.
    func offered(for entries: [QualifiedToolName]?, includingUnready: Bool) -> [OfferedTool] {
        var wanted: [(server: MCPServer, entry: QualifiedToolName?)] = []
        if let entries {
            for entry in entries { if let server = byName[entry.space] { wanted.append((server, entry)) } }
        } else {
            for server in servers(for: nil) { wanted.append((server, nil)) }
        }
        var found: [OfferedTool] = []
        for (server, entry) in wanted {
            let name = server.settings.name
            var tools: [OfferedTool]
            if server.status == .ready {
                tools = server.tools.map { tool in
                    OfferedTool(space: name, tool: tool.name, description: settings.secrets.redacting(tool.description), parameters: tool.inputSchema,
                                approval: server.settings.approval(for: tool.name), source: self, detail: MCPCallTarget(server: server, tool: tool))
                }
            } else if includingUnready {
                // Not running: what the config names is all that is known.
                var names = server.settings.tools ?? []
                if let one = entry?.tool, server.settings.tools == nil { names = [one] }
                tools = names.map { tool in
                    OfferedTool(space: name, tool: tool, description: "", parameters: [:], approval: server.settings.approval(for: tool),
                                isListed: false, source: self, detail: ())
                }
            } else {
                tools = []
            }
            for tool in tools where entry?.covers(tool.tool) ?? true {
                if !found.contains(where: { $0.space == name && $0.tool == tool.tool }) { found.append(tool) }
            }
        }
        return found
    }

    func prepare(_ entries: [QualifiedToolName]?, settled: @escaping (_ space: String, _ status: ToolSpaceStatus) -> Void) -> Int {
        let waiting = servers(for: entries).filter { $0.status != .ready }
        for server in waiting {
            server.whenReady { status in settled(server.settings.name, Self.status(status)) }
        }
        return waiting.count
    }

    func listedSpaces(for entries: [QualifiedToolName]?, toolCounts: [String: Int], seen: [String: ToolSpaceStatus]) -> [ListedServer] {
        servers(for: entries).map { listed($0, tools: toolCounts[$0.settings.name] ?? 0, status: seen[$0.settings.name] ?? Self.status($0.status)) }
    }

    /// A server's entry; its error (which may quote the server) redacted as its results are.
    /// The pid only of a process that is the server: a failed one's may linger while it is ended.
    func listed(_ server: MCPServer, tools: Int, status: ToolSpaceStatus) -> ListedServer {
        let state: MCPServerState
        var error: String?
        switch status {
        case .stopped: state = .stopped
        case .starting: state = .starting
        case .ready: state = .ready
        case .failed(let reason):
            state = .failed
            error = settings.secrets.redacting(reason)
        }
        return ListedServer(name: server.settings.name, transport: Self.transport(of: server.settings), state: state, error: error,
                            pid: (state == .starting || state == .ready) && Self.status(server.status) == status ? server.pid.map { Int($0) } : nil,
                            tools: tools)
    }

    /// How the daemon speaks to the server: a `[mcp.NAME]` with a `url` over Streamable HTTP,
    /// one with a `command` as a child process over stdio.
    static func transport(of settings: MCPServerSettings) -> MCPTransport {
        settings.http == nil ? .stdio : .http
    }

    static func status(_ status: MCPServer.Status) -> ToolSpaceStatus {
        switch status {
        case .stopped: .stopped
        case .starting: .starting
        case .ready: .ready
        case .failed(let reason): .failed(reason)
        }
    }

    /// The model's arguments are a JSON object, checked against the tool's schema where the
    /// schema is one this daemon can check, and by the server otherwise (a `pattern` that
    /// cannot run in linear time, such as one with a backreference, is left to the server, the
    /// rest of the schema checked here).
    func validate(_ tool: OfferedTool, arguments: String) -> Result<JSON, ToolArgumentError> {
        let schema = (tool.detail as! MCPCallTarget).tool.inputSchema
        let value: JSON
        switch ToolDefinition.parse(arguments: arguments) {
        case .success(let parsed): value = parsed
        case .failure(let error): return .failure(error)
        }
        if ToolSchema.problem(in: schema, unsupportedPatterns: .leftToServer) == nil, let problem = ToolSchema.validate(value, against: schema) {
            return .failure(ToolArgumentError(message: problem))
        }
        return .success(value)
    }

    /// A call through the same records and notifications as an HTTP tool's: the answer's text
    /// (redacted, cut at the HTTP tools' default size), or a failure the model is told of; a
    /// tool that says it failed (`isError`) is a `tool_error`.
    func start(_ offered: OfferedTool, arguments: JSON, as call: ToolCallContext,
               progress: @escaping (ToolCallProgress) -> Void, done: @escaping (ToolCallEnding) -> Void) -> any ToolCallHandle {
        let target = offered.detail as! MCPCallTarget
        let (server, tool) = (target.server, target.tool)
        let logger = settings.logger
        logger.info("conversation=\(call.conversation) call=\(call.call) tool=\(call.name) mcp=\(server.settings.name) \(ReplyRunner.loggable(tool.name))")
        let started = loop.now
        let handle = MCPToolCall(server: server)
        let made = server.call(tool: tool.name, arguments: arguments, progress: { update in
            guard !handle.isCancelled else { return }
            progress(ToolCallProgress(progress: update.progress, total: update.total, message: update.message))
        }) { [loop, settings] outcome in
            guard !handle.isCancelled else { return }
            handle.isOver = true
            handle.call = nil
            let milliseconds = Int(loop.now - started)
            let secrets = settings.secrets
            let cap = ToolDefinition.defaultMaxResponseBytes
            func failed(_ code: ReplyErrorCode, _ text: String) {
                settings.logger.warning("conversation=\(call.conversation) call=\(call.call) mcp=\(server.settings.name) failed: \(code.rawValue) after \(milliseconds) ms")
                let error = MessageError(code: code, message: secrets.redacting(ToolResponse.content(status: 200, body: Array(text.utf8), totalBytes: text.utf8.count, cap: cap).content))
                done(ToolCallEnding(status: .failed, error: error, content: "Error: \(error.message).", durationMilliseconds: milliseconds))
            }
            switch outcome {
            case .answered(let result):
                let body = Array(result.text.utf8)
                let answer = ToolResponse.content(status: 200, body: body, totalBytes: body.count, cap: cap)
                let content = secrets.redacting(answer.content)
                settings.logger.info("conversation=\(call.conversation) call=\(call.call) mcp=\(server.settings.name)\(result.isError ? " isError" : "") bytes=\(body.count) ms=\(milliseconds)")
                // The model sees what the tool said, as the failed call's content.
                done(ToolCallEnding(status: result.isError ? .failed : .complete,
                                    error: result.isError ? MessageError(code: .toolError, message: "the tool reported an error") : nil,
                                    content: content, durationMilliseconds: milliseconds, truncated: answer.truncated))
            case .refused(let reason): failed(.toolError, reason)
            case .timedOut(let reason): failed(.toolTimeout, reason)
            case .failed(let reason): failed(.toolConnection, reason)
            }
        }
        // Ended already (the server could not take it): nothing to cancel.
        if !handle.isOver { handle.call = made }
        return handle
    }
}

/// What a call of a ready server's tool needs.
private struct MCPCallTarget {
    let server: MCPServer
    let tool: MCPTool
}

private final class MCPToolCall: ToolCallHandle {
    let server: MCPServer
    var call: MCPServer.Call?
    var isOver = false
    private(set) var isCancelled = false

    init(server: MCPServer) {
        self.server = server
    }

    /// The server is told (`notifications/cancelled`) and its late answer ignored.
    func cancel() {
        isCancelled = true
        if let call { server.cancel(call, reason: "the call was cancelled") }
        call = nil
    }
}
