import ConfabProtocol
import DaemonSettings
import MCP
import Tools

extension Settings {
    /// The servers of `mcp_servers_file`: the `{"mcpServers": {NAME: {…}}}` file other MCP
    /// clients read, taken as they write it. A stdio entry (`command`, `args`, `env`, `cwd`,
    /// `"type": "stdio"`) becomes a server as a `[mcp.NAME]` table with those keys would; an
    /// entry that is `"disabled": true` is left out; `autoApprove` (tool names) runs those
    /// tools without a yes. Other keys are for other clients: ignored, said once in `warnings`.
    /// Errors name the file and the key path (`mcpServers.git.args`).
    static func mcpServersFile(_ path: String, configPath: String, tools: ToolTable, tables: [MCPServerSettings],
                               environment: [String: String], warnings: inout [String]) throws(ConfigError) -> [MCPServerSettings] {
        // A relative path is the config file's neighbour, whatever the daemon's working directory.
        var resolved = path
        if !path.hasPrefix("/"), let slash = configPath.lastIndex(of: "/") {
            resolved = String(configPath[...slash]) + path
        }
        let text = try readText(resolved, "mcp_servers_file")
        func error(_ keyPath: String, _ problem: String) -> ConfigError {
            ConfigError(description: "\(resolved): \(keyPath) \(problem)")
        }
        let document: JSON
        do {
            document = try JSON.parse(text)
        } catch {
            throw ConfigError(description: "\(resolved): is not JSON: \(error)")
        }
        guard let root = document.object else { throw ConfigError(description: "\(resolved): must hold a JSON object") }
        guard let entries = root["mcpServers"] else { throw ConfigError(description: "\(resolved): has no \"mcpServers\" object") }
        guard let servers = entries.object else { throw error("mcpServers", "must be an object of servers by name") }
        var ignored: [String] = root.keys.filter { $0 != "mcpServers" }.map(shown)
        var result: [MCPServerSettings] = []
        for name in servers.keys.sorted() {
            let keyPath = "mcpServers." + shown(name)
            guard let entry = servers[name]?.object else { throw error(keyPath, "must be an object") }
            if let disabled = entry["disabled"] {
                guard let value = disabled.bool else { throw error(keyPath + ".disabled", "must be true or false") }
                if value { continue }
            }
            guard isName(name) else { throw error(keyPath, "is not an MCP server name: 1 to 64 letters, digits, - or _") }
            if tables.contains(where: { $0.name == name }) {
                throw error(keyPath, "is also a [mcp.\(name)] table in \(configPath): a server is configured in one place")
            }
            guard tools[name] == nil else {
                throw error(keyPath, "has the name of a [tools.\(name)] table too: a profile's tools = [\"\(name)\"] must name one thing")
            }
            let type = try entry["type"].map { (value) throws(ConfigError) -> String in
                guard let text = value.string else { throw error(keyPath + ".type", "must be a string") }
                return text
            }
            if entry["url"] != nil || (type != nil && type != "stdio") {
                throw error(keyPath, "is a server over HTTP (\(type.map { "type \"\($0)\"" } ?? "url")): this daemon runs MCP servers over stdio only (command and args)")
            }
            guard let command = entry["command"] else { throw error(keyPath, "needs a command: the program that runs the server") }
            guard let program = command.string, !program.isEmpty, !program.contains("\0") else {
                throw error(keyPath + ".command", "must be a program name or path")
            }
            var arguments: [String] = []
            if let args = entry["args"] {
                guard let list = args.array else { throw error(keyPath + ".args", "must be an array of strings") }
                for (index, value) in list.enumerated() {
                    guard let text = value.string, !text.contains("\0") else {
                        throw error(keyPath + ".args[\(index)]", "must be a string without NUL characters")
                    }
                    arguments.append(text)
                }
            }
            var variables: [String: String] = [:]
            if let env = entry["env"] {
                guard let members = env.object else { throw error(keyPath + ".env", "must be an object of strings") }
                for (key, value) in members {
                    guard !key.isEmpty, !key.contains("="), !key.contains("\0") else {
                        throw error(keyPath + ".env", "holds \(shown(key)), which is not an environment variable name")
                    }
                    guard let text = value.string, !text.contains("\0") else {
                        throw error(keyPath + ".env." + shown(key), "must be a string")
                    }
                    variables[key] = text
                }
            }
            var directory: String?
            if let cwd = entry["cwd"] {
                guard let text = cwd.string, text.hasPrefix("/") else { throw error(keyPath + ".cwd", "must be an absolute path") }
                directory = text
            }
            var server = MCPServerSettings(name: name, command: program, arguments: arguments, environment: variables,
                                           passedEnvironment: MCPServerSettings.passed(from: environment), workingDirectory: directory)
            if let approved = entry["autoApprove"] {
                guard let list = approved.array else { throw error(keyPath + ".autoApprove", "must be an array of tool names") }
                for value in list {
                    guard let tool = value.string, !tool.isEmpty else { throw error(keyPath + ".autoApprove", "must be an array of tool names") }
                    server.toolApproval[tool] = .never
                }
            }
            let known: Set<String> = ["command", "args", "env", "cwd", "type", "disabled", "autoApprove"]
            ignored += entry.keys.filter { !known.contains($0) }.sorted().map { keyPath + "." + shown($0) }
            result.append(server)
        }
        if !ignored.isEmpty {
            warnings.append("\(resolved): ignored keys this daemon does not use: \(ignored.joined(separator: ", "))")
        }
        return result
    }

    /// A key from the file as a message may show it: control and format characters escaped.
    private static func shown(_ key: String) -> String {
        let plain = !key.isEmpty && key.unicodeScalars.allSatisfy { scalar in
            ![.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory) && scalar != "\""
        }
        return plain ? key : "\"" + key.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() + "\""
    }
}
