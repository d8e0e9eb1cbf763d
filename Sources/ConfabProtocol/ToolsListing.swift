// `tools.list` and `mcp.restart` as typed values: what the daemon answers and the client
// reads, field names spelled once.

/// Where a tool comes from: the kind of its source (the daemon's `ToolSource`s, one per kind).
public enum ToolSourceKind: String, CaseIterable, Sendable {
    /// A `[tools.NAME]` table: an HTTP request.
    case http
    /// A tool of an `[mcp.NAME]` server.
    case mcp
}

/// Whether each call of a tool waits for a person's yes: the one word for it, whether an HTTP
/// tool's `approval`, an MCP server's `approval` and `tool_approval`, or what `tools.list` says.
public enum ToolApproval: String, CaseIterable, Sendable {
    case always, never
}

/// `tools.list`'s name for it.
public typealias ToolApprovalPolicy = ToolApproval

/// How the daemon speaks to an MCP server.
public enum MCPTransport: String, CaseIterable, Sendable {
    /// A child process of the daemon, over its stdin and stdout.
    case stdio
    /// Streamable HTTP, at a URL.
    case http
}

/// An MCP server's state as `tools.list` reports it.
public enum MCPServerState: String, CaseIterable, Sendable {
    /// Not running: it starts when a conversation's reply first offers its tools.
    case stopped
    /// Started, its handshake or tool listing not yet done.
    case starting
    /// Running, its tools listed.
    case ready
    /// It could not be started, broke the protocol or exited; `error` says why.
    case failed
}

/// One tool of `tools.list`.
public struct ListedTool: Equatable, Sendable {
    /// The name the model calls it by: an HTTP tool's own name, an MCP tool's `SERVER__TOOL`.
    public var name: String
    public var source: ToolSourceKind
    /// An MCP tool's server.
    public var server: String?
    /// An MCP tool's name as its server lists it.
    public var tool: String?
    /// The tool's description: the config's for an HTTP tool, the server's for an MCP tool
    /// (untrusted text); empty for a tool of a server that is not running.
    public var description: String
    public var approval: ToolApproval
    /// False for an MCP tool named only by its server's `tools` filter: the server is not
    /// running, so what it offers is not known yet.
    public var isListed: Bool

    public init(name: String, source: ToolSourceKind, server: String? = nil, tool: String? = nil, description: String,
                approval: ToolApproval, isListed: Bool = true) {
        self.name = name
        self.source = source
        self.server = server
        self.tool = tool
        self.description = description
        self.approval = approval
        self.isListed = isListed
    }

    public var json: JSON {
        var object: [String: JSON] = ["name": .string(name), "source": .string(source.rawValue),
                                      "description": .string(description), "approval": .string(approval.rawValue)]
        if let server { object["server"] = .string(server) }
        if let tool { object["tool"] = .string(tool) }
        if !isListed { object["listed"] = .bool(false) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let name = json["name"]?.string, let source = json["source"]?.string.flatMap(ToolSourceKind.init(rawValue:)) else { return nil }
        self.init(name: name, source: source, server: json["server"]?.string, tool: json["tool"]?.string,
                  description: json["description"]?.string ?? "",
                  approval: json["approval"]?.string.flatMap(ToolApproval.init(rawValue:)) ?? .always,
                  isListed: json["listed"]?.bool ?? true)
    }
}

/// One MCP server of `tools.list` (and the answer of `mcp.restart`).
public struct ListedServer: Equatable, Sendable {
    public var name: String
    public var transport: MCPTransport
    public var state: MCPServerState
    /// Why it failed (untrusted text: it may quote the server).
    public var error: String?
    /// Its process, while one runs.
    public var pid: Int?
    /// How many tools it offers (once ready; before, how many its `tools` filter names).
    public var tools: Int

    public init(name: String, transport: MCPTransport, state: MCPServerState, error: String? = nil, pid: Int? = nil, tools: Int) {
        self.name = name
        self.transport = transport
        self.state = state
        self.error = error
        self.pid = pid
        self.tools = tools
    }

    public var json: JSON {
        var object: [String: JSON] = ["name": .string(name), "transport": .string(transport.rawValue),
                                      "state": .string(state.rawValue), "tools": .int(tools)]
        if let error { object["error"] = .string(error) }
        if let pid { object["pid"] = .int(pid) }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let name = json["name"]?.string, let state = json["state"]?.string.flatMap(MCPServerState.init(rawValue:)) else { return nil }
        self.init(name: name, transport: json["transport"]?.string.flatMap(MCPTransport.init(rawValue:)) ?? .stdio, state: state,
                  error: json["error"]?.string, pid: json["pid"]?.int, tools: json["tools"]?.int ?? 0)
    }
}

/// `tools.list`'s answer: every tool (HTTP tools by name, then each server's in its order) and
/// every MCP server, by name.
public struct ToolsListResult: RPCObject {
    public var tools: [ListedTool] = []
    public var servers: [ListedServer] = []

    public init() {}

    public init(tools: [ListedTool], servers: [ListedServer]) {
        self.tools = tools
        self.servers = servers
    }

    /// Read as a client reads it: an answer it cannot read lists nothing.
    public init(json: JSON) { self = (try? Self(decoding: json)) ?? Self() }

    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.knownValues("tools", &tools)
        try f.knownValues("servers", &servers)
    }
}

/// `mcp.restart`'s answer: the server once it is ready or has failed.
public struct MCPRestartResult: RPCObject {
    public var server: ListedServer?

    public init() {}

    public init(server: ListedServer) { self.server = server }

    /// Read as a client reads it: an answer it cannot read names no server.
    public init(json: JSON) { self = (try? Self(decoding: json)) ?? Self() }

    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.nullableValue("server", &server) }
}
