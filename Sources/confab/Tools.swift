#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Terminal

struct ToolsCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "tools",
        abstract: "List the tools models can call, and the MCP servers they come from.",
        discussion: """
            HTTP tools ([tools.NAME]) and the tools of each MCP server ([mcp.NAME]), each under \
            the name the model calls it by, with whether a call waits for approval; each server \
            with its state (stopped, starting, ready, failed and why), process id and tool count. \
            Listing starts no server: one that is not running shows only the tools its config \
            names (--start starts them first). --restart ends a server's process (its calls in \
            flight fail) and starts it again; the exit status is 1 when it then fails.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(help: ArgumentHelp("Only the tools this profile offers.", valueName: "name")) var profile: String?
    @Flag(help: "Start the MCP servers that are not running, and list once each is ready or has failed.") var start = false
    @Option(help: ArgumentHelp("Restart this MCP server and wait until it is ready or has failed.", valueName: "server"))
    var restart: String?
    @Flag(help: "Print the raw result object as JSON.") var json = false

    func validate() throws {
        if restart != nil, start || profile != nil {
            throw ValidationError("--restart takes no --start or --profile")
        }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "tools")
        if let restart {
            let raw = try connection.call(.mcpRestart, MCPRestartParams(server: restart).json)
            let server = MCPRestartResult(json: raw).server
            if json {
                Out.json(raw)
            } else if let server {
                Out.stdout(ToolsTable.serverLine(server) + "\n")
            }
            if server?.state != .ready { throw Failure.exit(1) }
            return
        }
        let raw = try connection.call(.toolsList, ToolsListParams(profile: profile, start: start ? true : nil).json)
        if json { return Out.json(raw) }
        let listing = ToolsListResult(json: raw)
        if listing.tools.isEmpty && listing.servers.isEmpty {
            Out.errorLine(profile == nil ? "no tools: add [tools.NAME] or [mcp.NAME] tables to confabd's config file"
                                         : "profile \(SafeText.singleLine(profile ?? "")) offers no tools")
            return
        }
        let columns = isatty(1) != 0 ? TerminalSize.of(1)?.columns : nil
        Out.stdout(ToolsTable.text(listing, width: columns))
    }
}

/// `confab tools` and `/tools`: tools grouped by where they come from, HTTP tools first, then
/// each MCP server with its state and its tools. Descriptions, server names and errors come
/// from the config or from servers, so each is made one safe line before it is measured.
enum ToolsTable {
    /// With `width`, a description is cut to fit its line; without, lines are whole.
    static func text(_ listing: ToolsListResult, width: Int?) -> String {
        let names = listing.tools.map { SafeText.singleLine($0.name) }
        let nameWidth = names.map { DisplayWidth.of($0) }.max() ?? 0
        func row(_ index: Int) -> String {
            let tool = listing.tools[index]
            let start = "  " + DisplayWidth.pad(names[index], to: nameWidth) + "  " + DisplayWidth.pad(tool.approval.rawValue, to: 6) + "  "
            var description = SafeText.singleLine(tool.description)
            if !tool.isListed { description = "(listed once the server runs)" }
            if let width { description = DisplayWidth.truncate(description, to: max(10, width - DisplayWidth.of(start))) }
            return start + description + "\n"
        }
        var text = ""
        let http = listing.tools.indices.filter { listing.tools[$0].source == .http }
        if !http.isEmpty {
            text += "HTTP tools (approval, description):\n"
            for index in http { text += row(index) }
        }
        for server in listing.servers {
            text += "MCP " + serverLine(server) + "\n"
            for index in listing.tools.indices where listing.tools[index].source == .mcp && listing.tools[index].server == server.name {
                text += row(index)
            }
        }
        return text
    }

    /// `server time (stdio): ready, pid 4242, 2 tools`; a failed one's error after it.
    static func serverLine(_ server: ListedServer) -> String {
        var line = "server \(SafeText.singleLine(server.name)) (\(server.transport.rawValue)): \(server.state.rawValue)"
        if let pid = server.pid { line += ", pid \(pid)" }
        switch server.state {
        case .ready: line += ", " + Words.count(server.tools, "tool")
        case .stopped: line += " (starts when a conversation offers its tools; confab tools --start starts it now)"
        case .starting: break
        case .failed: line += ": " + SafeText.singleLine(server.error ?? "no reason given")
        }
        return line
    }
}
