import DaemonSettings
import ServiceSettings
import TOML
import Tools

extension Settings {
    /// A `[mcp.NAME]` table, checked: errors name the key and its line.
    static func mcpServer(_ section: ConfigFile.MCPSection, tools: ToolTable,
                          environment: [String: String], warnings: inout [String]) throws(ConfigError) -> MCPServerSettings {
        let table = section.table
        let name = section.name
        func tableError(_ problem: String) -> ConfigError {
            let line = (table.position ?? table.table.members.first?.position).map { "\($0): " } ?? ""
            return ConfigError(description: "\(table.file): \(line)\(table.path) \(problem)")
        }
        // The name is a prefix of model-facing names (`NAME__TOOL`) and of `NAME.TOOL` in profiles.
        guard isName(name) else { throw tableError("is not an MCP server name: 1 to 64 letters, digits, - or _") }
        guard tools[name] == nil else {
            throw tableError("has the name of a [tools.\(name)] table too: a profile's tools = [\"\(name)\"] must name one thing")
        }
        // A server reached over HTTP, not run.
        let http = try mcpHTTPEndpoint(section, environment: environment, warnings: &warnings)
        guard let command = section.command ?? (http == nil ? nil : "") else {
            throw tableError("needs a command (the program that runs the server) or a url (a server over HTTP)")
        }
        guard !command.isEmpty || http != nil, !command.contains("\0") else { throw table.error("command", "must be a program name or path") }
        if let args = section.args, args.contains(where: { $0.contains("\0") }) {
            throw table.error("args", "must not hold NUL characters")
        }
        var variables: [String: String] = [:]
        for (key, value) in section.env ?? [] {
            guard !key.isEmpty, !key.contains("="), !key.contains("\0"), !value.contains("\0") else {
                throw table.error("env", "holds \"\(key)\", which is not an environment variable name")
            }
            variables[key] = value
        }
        if let cwd = section.cwd, !cwd.hasPrefix("/") {
            throw table.error("cwd", "must be an absolute path, not \"\(cwd)\"")
        }
        var approval = MCPServerSettings.Approval.always
        if let text = section.approval {
            guard let value = MCPServerSettings.Approval(rawValue: text) else {
                throw table.error("approval", "must be \"always\" or \"never\", not \"\(text)\"")
            }
            approval = value
        }
        if let offered = section.tools {
            guard !offered.isEmpty else { throw table.error("tools", "must name at least one tool (leave it out to offer them all)") }
            var seen: Set<String> = []
            for tool in offered {
                guard !tool.isEmpty else { throw table.error("tools", "must not hold an empty name") }
                guard seen.insert(tool).inserted else { throw table.error("tools", "names \"\(tool)\" twice") }
            }
        }
        for (key, value, range) in [("timeout_seconds", section.timeout_seconds, 1...3600),
                                    ("startup_timeout_seconds", section.startup_timeout_seconds, 1...600)] {
            if let value, !range.contains(value) {
                throw table.error(key, "must be between \(range.lowerBound) and \(range.upperBound)")
            }
        }
        var start = MCPServerSettings.Start.onDemand
        if let text = section.start {
            guard let value = MCPServerSettings.Start(rawValue: text) else {
                throw table.error("start", "must be \"always\" or \"on_demand\", not \"\(text)\"")
            }
            start = value
        }
        // Tool names are not checked here: the server lists its tools once it runs, and the
        // daemon warns then of a name it does not list.
        var toolApproval: [String: MCPServerSettings.Approval] = [:]
        if let entries = section.tool_approval {
            // The inner table, for errors at its members' lines.
            var written = TOMLTable()
            if case .table(let members)? = table.table["tool_approval"] { written = members }
            let inner = ConfigTable(file: table.file, path: table.name("tool_approval"), table: written)
            for (tool, text) in entries {
                guard !tool.isEmpty else { throw table.error("tool_approval", "must not name an empty tool") }
                guard let value = MCPServerSettings.Approval(rawValue: text) else {
                    throw inner.error(tool, "must be \"always\" or \"never\", not \"\(text)\"")
                }
                toolApproval[tool] = value
            }
        }
        var server = MCPServerSettings(name: name, command: command, arguments: section.args ?? [], environment: variables,
                                       passedEnvironment: http == nil ? MCPServerSettings.passed(from: environment) : [:], workingDirectory: section.cwd,
                                       approval: approval, tools: section.tools, timeoutSeconds: section.timeout_seconds ?? 60,
                                       startupTimeoutSeconds: section.startup_timeout_seconds ?? 30)
        server.http = http
        server.start = start
        server.toolApproval = toolApproval
        return server
    }
}
