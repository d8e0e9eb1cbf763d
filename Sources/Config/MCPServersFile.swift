import ConfabProtocol
import DaemonSettings
import Posix
import ServiceSettings
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
                result.append(try httpServer(name, entry, type: type, keyPath: keyPath, error: error))
                ignored += entry.keys.filter { !["url", "headers", "type", "disabled", "autoApprove"].contains($0) }.sorted().map { keyPath + "." + shown($0) }
                continue
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
            server.toolApproval = try autoApproved(entry, keyPath: keyPath, error: error)
            let known: Set<String> = ["command", "args", "env", "cwd", "type", "disabled", "autoApprove"]
            ignored += entry.keys.filter { !known.contains($0) }.sorted().map { keyPath + "." + shown($0) }
            result.append(server)
        }
        if !ignored.isEmpty {
            warnings.append("\(resolved): ignored keys this daemon does not use: \(ignored.joined(separator: ", "))")
        }
        // As a config file holding an API key: credentials others can read are no secrets.
        let holdsCredential = result.contains { server in
            server.environment.contains { ToolHeader.namesCredential($0.key) && !$0.value.isEmpty }
                || (server.http?.headers ?? []).contains { $0.isSecret && !$0.value.isEmpty }
        }
        if holdsCredential, let info = try? Files.status(path: resolved), info.permissions & 0o077 != 0 {
            warnings.append("\(resolved) holds an MCP server's credentials and can be read by others: chmod 600 \(resolved)")
        }
        return result
    }

    /// `autoApprove`: the tools that run without a yes.
    private static func autoApproved(_ entry: [String: JSON], keyPath: String,
                                     error: (String, String) -> ConfigError) throws(ConfigError) -> [String: MCPServerSettings.Approval] {
        guard let approved = entry["autoApprove"] else { return [:] }
        guard let list = approved.array else { throw error(keyPath + ".autoApprove", "must be an array of tool names") }
        var approval: [String: MCPServerSettings.Approval] = [:]
        for value in list {
            guard let tool = value.string, !tool.isEmpty else { throw error(keyPath + ".autoApprove", "must be an array of tool names") }
            approval[tool] = .never
        }
        return approval
    }

    /// An entry with `url` (`"type": "http"` or `"streamable-http"`): a server over Streamable
    /// HTTP, as a `[mcp.NAME]` table with `url` and `headers` would be. A header named as a
    /// credential's (`Authorization`, …) is a secret: sent, never shown or logged.
    private static func httpServer(_ name: String, _ entry: [String: JSON], type: String?, keyPath: String,
                                   error: (String, String) -> ConfigError) throws(ConfigError) -> MCPServerSettings {
        if let type, !["http", "streamable-http", "streamableHttp"].contains(type) {
            throw error(keyPath + ".type", "is \"\(shown(type))\": this daemon speaks stdio (command) and Streamable HTTP (\"http\", \"streamable-http\"), not the older SSE transport")
        }
        guard let url = entry["url"]?.string else { throw error(keyPath, "needs a url: the server's Streamable HTTP endpoint") }
        for key in ["command", "args", "env", "cwd"] where entry[key] != nil {
            throw error(keyPath + "." + key, "is for a server that is run; this one is reached over HTTP (url)")
        }
        let lower = url.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), url.utf8.count <= 2048, isHeaderValue(url), !url.contains(" ") else {
            throw error(keyPath + ".url", "must be an http:// or https:// URL without spaces or control characters")
        }
        guard !url.contains("#") else { throw error(keyPath + ".url", "must not hold a fragment (#…): it is never sent") }
        var headers: [ToolHeader] = []
        if let given = entry["headers"] {
            guard let members = given.object else { throw error(keyPath + ".headers", "must be an object of strings") }
            let reserved: Set<String> = ["accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"]
            for (header, value) in members.sorted(by: { $0.key < $1.key }) {
                let place = keyPath + ".headers." + shown(header)
                guard isHeaderName(header) else { throw error(place, "is not an HTTP header name") }
                guard !reserved.contains(header.lowercased()) else { throw error(place, "is a header the transport sets itself") }
                guard !headers.contains(where: { $0.name.lowercased() == header.lowercased() }) else { throw error(place, "is given twice") }
                guard let text = value.string, isHeaderValue(text) else {
                    throw error(place, "must be a string without line breaks or control characters")
                }
                headers.append(ToolHeader(name: header, value: text, isSecret: ToolHeader.namesCredential(header)))
            }
        }
        var server = MCPServerSettings(name: name, command: "")
        server.http = MCPHTTPEndpoint(url: url, headers: headers)
        server.toolApproval = try autoApproved(entry, keyPath: keyPath, error: error)
        return server
    }

    /// A key from the file as a message may show it: control and format characters escaped.
    private static func shown(_ key: String) -> String {
        let plain = !key.isEmpty && key.unicodeScalars.allSatisfy { scalar in
            ![.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory) && scalar != "\""
        }
        return plain ? key : "\"" + key.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() + "\""
    }
}
