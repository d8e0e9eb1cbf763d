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
            if tables.contains(where: { $0.name == name }) {
                throw error(keyPath, "is also a [mcp.\(name)] table in \(configPath): a server is configured in one place")
            }
            let place = MCPServerPlace(at: { key, problem in error(keyPath + "." + key, problem) },
                                       whole: { problem in error(keyPath, problem) })
            let type = try entry["type"].map { (value) throws(ConfigError) -> String in
                guard let text = value.string else { throw error(keyPath + ".type", "must be a string") }
                return text
            }
            if let type, !["stdio", "http", "streamable-http", "streamableHttp"].contains(type) {
                throw error(keyPath + ".type", "is \"\(shown(type))\": this daemon speaks stdio (command) and Streamable HTTP (\"http\", \"streamable-http\"), not the older SSE transport")
            }
            var draft = MCPServerDraft(name: name, place: place)
            draft.command = try string(entry, "command", keyPath: keyPath, error: error)
            draft.cwd = try string(entry, "cwd", keyPath: keyPath, error: error)
            draft.url = try string(entry, "url", keyPath: keyPath, error: error)
            if let type, type != "stdio", draft.url == nil {
                throw error(keyPath, "needs a url: the server's Streamable HTTP endpoint")
            }
            if let args = entry["args"] {
                guard let list = args.array else { throw error(keyPath + ".args", "must be an array of strings") }
                var arguments: [String] = []
                for (index, value) in list.enumerated() {
                    guard let text = value.string else { throw error(keyPath + ".args[\(index)]", "must be a string") }
                    arguments.append(text)
                }
                draft.args = arguments
            }
            if let env = entry["env"] {
                guard let members = env.object else { throw error(keyPath + ".env", "must be an object of strings") }
                var variables: [(key: String, value: String)] = []
                for (key, value) in members.sorted(by: { $0.key < $1.key }) {
                    guard let text = value.string else { throw error(keyPath + ".env." + shown(key), "must be a string") }
                    variables.append((key, text))
                }
                draft.env = variables
            }
            if let given = entry["headers"] {
                draft.httpKeys = ["headers"]
                guard let members = given.object else { throw error(keyPath + ".headers", "must be an object of strings") }
                for (header, value) in members.sorted(by: { $0.key < $1.key }) {
                    let place = keyPath + ".headers." + shown(header)
                    guard let text = value.string else { throw error(place, "must be a string") }
                    if let problem = headerProblem(name: header, value: text) { throw error(place, problem) }
                    // HTTP ignores case: two keys that differ only in it are one header twice.
                    guard !draft.headers.contains(where: { $0.name.lowercased() == header.lowercased() }) else {
                        throw error(place, "is given once more in headers: a header comes from one place")
                    }
                    draft.headers.append(ToolHeader(name: header, value: text, isSecret: ToolHeader.namesCredential(header)))
                }
            }
            draft.toolApproval = try autoApproved(entry, keyPath: keyPath, error: error).sorted { $0.key < $1.key }
                .map { (key: $0.key, value: $0.value.rawValue) }
            result.append(try mcpServer(draft, tools: tools, environment: environment))
            let known: Set<String> = draft.url == nil ? ["command", "args", "env", "cwd", "type", "disabled", "autoApprove"]
                : ["url", "headers", "type", "disabled", "autoApprove"]
            ignored += entry.keys.filter { !known.contains($0) }.sorted().map { keyPath + "." + shown($0) }
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
                                     error: (String, String) -> ConfigError) throws(ConfigError) -> [String: ToolApproval] {
        guard let approved = entry["autoApprove"] else { return [:] }
        guard let list = approved.array else { throw error(keyPath + ".autoApprove", "must be an array of tool names") }
        var approval: [String: ToolApproval] = [:]
        for value in list {
            guard let tool = value.string, !tool.isEmpty else { throw error(keyPath + ".autoApprove", "must be an array of tool names") }
            approval[tool] = .never
        }
        return approval
    }

    /// The string at `key` of an entry, if given.
    private static func string(_ entry: [String: JSON], _ key: String, keyPath: String,
                               error: (String, String) -> ConfigError) throws(ConfigError) -> String? {
        guard let value = entry[key] else { return nil }
        guard let text = value.string else { throw error(keyPath + "." + key, "must be a string") }
        return text
    }

    /// A key from the file as a message may show it: control and format characters escaped.
    private static func shown(_ key: String) -> String {
        let plain = !key.isEmpty && key.unicodeScalars.allSatisfy { scalar in
            ![.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory) && scalar != "\""
        }
        return plain ? key : "\"" + key.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() + "\""
    }
}
