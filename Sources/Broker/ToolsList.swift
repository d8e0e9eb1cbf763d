import ConfabProtocol
import DaemonSettings
import MCP
import ServiceSettings
import Tools

/// `tools.list` and `mcp.restart`: what tools there are, where each comes from, and how each
/// MCP server is doing.
extension Broker {
    /// `tools.list {profile?, start?}`. Listing starts no server: one not running lists only
    /// the tools its `tools` filter (or the profile) names. With `start: true` every server
    /// listed that is not ready is started (or waited for) first, and the answer comes once
    /// each is ready or has failed (bounded by its `startup_timeout_seconds`).
    func listTools(_ params: ToolsListParams, _ respond: @escaping Respond) throws(RPCError) {
        let profile = try listedProfile(named: params.profile)
        let start = params.start ?? false
        guard start else { return respond(.success(toolsListing(offeredBy: profile).json)) }
        try refuseWhenStopping()
        let waiting = listedServers(offeredBy: profile).filter { $0.status != .ready }
        guard !waiting.isEmpty else { return respond(.success(toolsListing(offeredBy: profile).json)) }
        var left = waiting.count
        // Each server as it was when its start ended: one that failed may be starting again
        // (after its restart delay) by the time the slowest is ready, and its failure is the news.
        var seen: [ObjectIdentifier: MCPServer.Status] = [:]
        for server in waiting {
            server.whenReady { [unowned self] status in
                seen[ObjectIdentifier(server)] = status
                left -= 1
                if left == 0 { respond(.success(toolsListing(offeredBy: profile, asSeen: seen).json)) }
            }
        }
    }

    private func listedProfile(named name: String?) throws(RPCError) -> Profile? {
        guard let name else { return nil }
        guard let found = profiles[name] else {
            let known = profiles.sorted.map(\.name)
            throw .invalidParams("no profile \"\(name.prefix(200))\": " + (known.isEmpty ? "the config has none" : "the config has \(known.joined(separator: ", "))"))
        }
        return found
    }

    /// `mcp.restart {server}`: ends the server's process (its calls in flight fail) and starts
    /// it again; answers with its state once it is ready or has failed.
    func restartMCPServer(_ params: MCPRestartParams, _ client: ClientSession, _ respond: @escaping Respond) throws(RPCError) {
        let name = params.server
        guard let server = replies.mcp.byName[name] else {
            let known = current.value.mcpServers.map(\.name)
            throw .invalidParams("no MCP server \"\(name.prefix(200))\": " + (known.isEmpty ? "the config has none" : "the config has \(known.joined(separator: ", "))"))
        }
        try refuseWhenStopping()
        logger.info("mcp=\(name) restart asked for by client=\(client.id)")
        server.restart()
        server.whenReady { [unowned self] status in
            respond(.success(MCPRestartResult(server: listed(server, tools: toolCount(of: server), status: status)).json))
        }
    }

    /// The servers a listing covers: all configured, in the config's order, or those `profile` names.
    private func listedServers(offeredBy profile: Profile?) -> [MCPServer] {
        let all = current.value.mcpServers.compactMap { replies.mcp.byName[$0.name] }
        guard let profile else { return all }
        let named = Set(profile.tools.filter { current.tools[$0] == nil }.map { String($0.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)[0]) })
        return all.filter { named.contains($0.settings.name) }
    }

    /// Every tool (or those `profile` offers) and every server it covers. MCP tools get the
    /// model-facing names a conversation offering the same tools gives them: in the profile's
    /// order for a profile, else each server's in the config's order, never an HTTP tool's name.
    func toolsListing(offeredBy profile: Profile?, asSeen seen: [ObjectIdentifier: MCPServer.Status] = [:]) -> ToolsListResult {
        let http = profile.map { $0.tools.compactMap { current.tools[$0] } } ?? current.tools.sorted
        var listedTools = http.map { definition in
            ListedTool(name: definition.name, source: .http, description: definition.description,
                       approval: Self.listed(definition.approval))
        }
        let servers = listedServers(offeredBy: profile)
        // (server, one tool's name or nil for all it offers), as a profile's `tools` names them.
        var entries: [(server: MCPServer, only: String?)] = []
        if let profile {
            for entry in profile.tools where current.tools[entry] == nil {
                let parts = entry.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                if let server = replies.mcp.byName[parts[0]] { entries.append((server, parts.count > 1 ? parts[1] : nil)) }
            }
        } else {
            entries = servers.map { (server: $0, only: nil) }
        }
        var found: [(server: MCPServer, tool: String, description: String, isListed: Bool)] = []
        for (server, only) in entries {
            let known: [(String, String, Bool)]
            if server.status == .ready {
                known = server.tools.map { ($0.name, $0.description, true) }
            } else {
                // Not running: what the config names is all that is known.
                var names = server.settings.tools ?? []
                if let only, server.settings.tools == nil { names = [only] }
                known = names.map { ($0, "", false) }
            }
            for (tool, description, isListed) in known where only == nil || tool == only {
                if !found.contains(where: { $0.server === server && $0.tool == tool }) {
                    found.append((server, tool, description, isListed))
                }
            }
        }
        let names = MCPToolNames(found.map { MCPToolNames.Target(server: $0.server.settings.name, tool: $0.tool) },
                                 taken: Set(listedTools.map(\.name)))
        var counts: [ObjectIdentifier: Int] = [:]
        for entry in found {
            let server = entry.server.settings.name
            guard let name = names.byTarget[MCPToolNames.Target(server: server, tool: entry.tool)] else { continue }
            counts[ObjectIdentifier(entry.server), default: 0] += 1
            listedTools.append(ListedTool(name: name, source: .mcp, server: server, tool: entry.tool, description: secrets.redacting(entry.description),
                                     approval: Self.listed(OfferedTool.approval(of: entry.tool, on: entry.server.settings)),
                                     isListed: entry.isListed))
        }
        let serverList = servers.map { listed($0, tools: counts[ObjectIdentifier($0)] ?? 0, status: seen[ObjectIdentifier($0)] ?? $0.status) }
        return ToolsListResult(tools: listedTools, servers: serverList)
    }

    /// A tool's approval as the listing says it: what a call of it does (`OfferedTool`).
    private static func listed(_ approval: ToolApproval) -> ToolApprovalPolicy {
        approval == .always ? .always : .never
    }

    private func toolCount(of server: MCPServer) -> Int {
        server.status == .ready ? server.tools.count : (server.settings.tools?.count ?? 0)
    }

    /// A server's entry; its error (which may quote the server) redacted as its results are.
    /// The pid only of a process that is the server: a failed one's may linger while it is ended.
    private func listed(_ server: MCPServer, tools: Int, status: MCPServer.Status) -> ListedServer {
        let state: MCPServerState
        var error: String?
        switch status {
        case .stopped: state = .stopped
        case .starting: state = .starting
        case .ready: state = .ready
        case .failed(let reason):
            state = .failed
            error = secrets.redacting(reason)
        }
        return ListedServer(name: server.settings.name, transport: Self.transport(of: server.settings), state: state, error: error,
                            pid: (state == .starting || state == .ready) && server.status == status ? server.pid.map { Int($0) } : nil, tools: tools)
    }

    /// How the daemon speaks to the server: a `[mcp.NAME]` with a `url` over Streamable HTTP,
    /// one with a `command` as a child process over stdio.
    static func transport(of settings: MCPServerSettings) -> MCPTransport {
        settings.http == nil ? .stdio : .http
    }
}
