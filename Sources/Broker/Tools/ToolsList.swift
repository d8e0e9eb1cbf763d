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
    func listTools(_ params: ToolsListParams, _ respond: Respond) throws(RPCError) {
        let entries = try listedProfile(named: params.profile)?.toolEntries
        let sources = replies.toolSources
        guard params.start ?? false else { return respond(.success(sources.listing(for: entries).json)) }
        try refuseWhenStopping()
        // Each server as it was when its start ended: one that failed may be starting again
        // (after its restart delay) by the time the slowest is ready, and its failure is the news.
        var seen: [String: ToolSpaceStatus] = [:]
        let waiting = sources.prepare(entries, settled: { space, status in seen[space] = status }, then: {
            respond(.success(sources.listing(for: entries, seen: seen).json))
        })
        if !waiting { respond(.success(sources.listing(for: entries, seen: seen).json)) }
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
    func restartMCPServer(_ params: MCPRestartParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let name = params.server
        guard let server = replies.mcp.byName[name] else {
            let known = current.value.mcpServers.map(\.name)
            throw .invalidParams("no MCP server \"\(name.prefix(200))\": " + (known.isEmpty ? "the config has none" : "the config has \(known.joined(separator: ", "))"))
        }
        try refuseWhenStopping()
        logger.info("mcp=\(name) restart asked for by client=\(client.id)")
        server.restart()
        server.whenReady { [unowned self] status in
            let tools = server.status == .ready ? server.tools.count : (server.settings.tools?.count ?? 0)
            respond(.success(MCPRestartResult(server: replies.mcp.listed(server, tools: tools, status: MCPServers.status(status))).json))
        }
    }
}
