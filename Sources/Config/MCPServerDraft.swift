import ConfabProtocol
import DaemonSettings
import ServiceSettings
import TOML
import Tools

/// Where an MCP server was written, for its errors: a `[mcp.NAME]` table (a key's line) or an
/// entry of the `mcpServers` file (a key's path in it). The messages are the same either way.
struct MCPServerPlace {
    /// An error at one key of the server (`args`, `url`, a member of one: `headers.NAME`).
    let at: (_ key: String, _ problem: String) -> ConfigError
    /// An error about the server as a whole (its name, what it lacks).
    let whole: (_ problem: String) -> ConfigError

    /// A `[mcp.NAME]` table: a key at its line, a member of an inner table (`tool_approval.write`)
    /// at the member's, the table as a whole at its header.
    static func table(_ table: ConfigTable) -> MCPServerPlace {
        MCPServerPlace(at: { key, problem in
            if let dot = key.firstIndex(of: "."), case .table(let inner)? = table.table[String(key[..<dot])] {
                let member = ConfigTable(file: table.file, path: table.name(String(key[..<dot])), table: inner)
                return member.error(String(key[key.index(after: dot)...]), problem)
            }
            return table.error(key, problem)
        }, whole: { problem in
            let line = (table.position ?? table.table.members.first?.position).map { "\($0): " } ?? ""
            return ConfigError(description: "\(table.file): \(line)\(table.path) \(problem)")
        })
    }
}

/// One MCP server as written, in either form the daemon reads (`[mcp.NAME]` in config.toml,
/// an entry of the `mcpServers` JSON file), before any check of its values: each form's reader
/// fills it from its own types and checks only those (a JSON `args` that is no array), then
/// `Settings.mcpServer(_:)` checks it once, so the same mistake gets the same message in both.
struct MCPServerDraft {
    var name: String
    var place: MCPServerPlace
    var command: String?
    var args: [String]?
    var env: [(key: String, value: String)]?
    var cwd: String?
    var approval: String?
    var tools: [String]?
    var timeoutSeconds: Int?
    var startupTimeoutSeconds: Int?
    var start: String?
    var toolApproval: [(key: String, value: String)]?
    /// A server reached over Streamable HTTP.
    var url: String?
    /// Its headers, read where the form lets them come from (each header's own checks done
    /// there: `Settings.headerProblem`); only for a server with a `url`.
    var headers: [ToolHeader] = []
    /// The keys given that only a server over HTTP takes, in the order a message names them.
    var httpKeys: [String] = []

    init(name: String, place: MCPServerPlace) {
        self.name = name
        self.place = place
    }
}

extension Settings {
    /// An MCP server's draft, checked: the one place its values are judged.
    static func mcpServer(_ draft: MCPServerDraft, tools: ToolTable, environment: [String: String]) throws(ConfigError) -> MCPServerSettings {
        let at = draft.place.at
        let name = draft.name
        // The name is a prefix of model-facing names (`NAME__TOOL`) and of `NAME.TOOL` in profiles.
        guard isName(name) else { throw draft.place.whole("is not an MCP server name: 1 to 64 letters, digits, - or _") }
        guard tools[name] == nil else {
            throw draft.place.whole("has the name of a [tools.\(name)] table too: a profile's tools = [\"\(name)\"] must name one thing")
        }
        var http: MCPHTTPEndpoint?
        if let url = draft.url {
            if draft.command != nil {
                throw at("url", "cannot be given with command: a server is either run (command) or reached over HTTP (url)")
            }
            let processKeys: [(key: String, given: Bool)] = [("args", draft.args != nil), ("env", draft.env != nil), ("cwd", draft.cwd != nil)]
            if let key = processKeys.first(where: \.given)?.key {
                throw at(key, "is for a server run with command; this one is reached over HTTP (url)")
            }
            let lower = url.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), url.utf8.count <= 2048, isHeaderValue(url), !url.contains(" ") else {
                throw at("url", "must be an http:// or https:// URL without spaces or control characters")
            }
            guard !url.contains("#") else { throw at("url", "must not hold a fragment (#…): it is never sent") }
            for reserved in ["accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"] {
                if let header = draft.headers.first(where: { $0.name.lowercased() == reserved }) {
                    throw at("headers", "sets \(header.name), which the transport sets itself")
                }
            }
            http = MCPHTTPEndpoint(url: url, headers: draft.headers)
        } else if let key = draft.httpKeys.first {
            throw at(key, "is for a server over HTTP (url); this one is run with command")
        }
        guard let command = draft.command ?? (http == nil ? nil : "") else {
            throw draft.place.whole("needs a command (the program that runs the server) or a url (a server over HTTP)")
        }
        guard !command.isEmpty || http != nil, !command.contains("\0") else { throw at("command", "must be a program name or path") }
        if let args = draft.args, args.contains(where: { $0.contains("\0") }) {
            throw at("args", "must not hold NUL characters")
        }
        var variables: [String: String] = [:]
        for (key, value) in draft.env ?? [] {
            guard !key.isEmpty, !key.contains("="), !key.contains("\0") else {
                throw at("env", "holds \(quoted(key)), which is not an environment variable name")
            }
            guard !value.contains("\0") else { throw at("env", "holds \(quoted(key)), whose value has a NUL character") }
            variables[key] = value
        }
        if let cwd = draft.cwd, !cwd.hasPrefix("/") {
            throw at("cwd", "must be an absolute path, not \(quoted(cwd))")
        }
        var approval = ToolApproval.always
        if let text = draft.approval {
            guard let value = ToolApproval(rawValue: text) else {
                throw at("approval", "must be \"always\" or \"never\", not \(quoted(text))")
            }
            approval = value
        }
        if let offered = draft.tools {
            guard !offered.isEmpty else { throw at("tools", "must name at least one tool (leave it out to offer them all)") }
            var seen: Set<String> = []
            for tool in offered {
                guard !tool.isEmpty else { throw at("tools", "must not hold an empty name") }
                guard seen.insert(tool).inserted else { throw at("tools", "names \(quoted(tool)) twice") }
            }
        }
        for (key, value, range) in [("timeout_seconds", draft.timeoutSeconds, 1...3600),
                                    ("startup_timeout_seconds", draft.startupTimeoutSeconds, 1...600)] {
            if let value, !range.contains(value) {
                throw at(key, "must be between \(range.lowerBound) and \(range.upperBound)")
            }
        }
        var start = MCPServerSettings.Start.onDemand
        if let text = draft.start {
            guard let value = MCPServerSettings.Start(rawValue: text) else {
                throw at("start", "must be \"always\" or \"on_demand\", not \(quoted(text))")
            }
            start = value
        }
        // Tool names are not checked here: the server lists its tools once it runs, and the
        // daemon warns then of a name it does not list.
        var toolApproval: [String: ToolApproval] = [:]
        for (tool, text) in draft.toolApproval ?? [] {
            guard !tool.isEmpty else { throw at("tool_approval", "must not name an empty tool") }
            guard let value = ToolApproval(rawValue: text) else {
                throw at("tool_approval." + tool, "must be \"always\" or \"never\", not \(quoted(text))")
            }
            toolApproval[tool] = value
        }
        var server = MCPServerSettings(name: name, command: command, arguments: draft.args ?? [], environment: variables,
                                       passedEnvironment: http == nil ? MCPServerSettings.passed(from: environment) : [:],
                                       workingDirectory: draft.cwd, approval: approval, tools: draft.tools,
                                       timeoutSeconds: draft.timeoutSeconds ?? 60, startupTimeoutSeconds: draft.startupTimeoutSeconds ?? 30)
        server.http = http
        server.start = start
        server.toolApproval = toolApproval
        return server
    }

    /// Text from the file in a message: quoted, its control and format characters escaped.
    static func quoted(_ text: String) -> String {
        "\"" + text.unicodeScalars.map { scalar in
            [.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory) || scalar == "\""
                || scalar == "\\" ? scalar.escaped(asASCII: true) : String(scalar)
        }.joined() + "\""
    }

    /// What is wrong with a header written inline, if anything (as a tool's `headers`, an MCP
    /// server's `headers` in either form).
    static func headerProblem(name: String, value: String) -> String? {
        guard isHeaderName(name) else { return "is not an HTTP header name" }
        guard isHeaderValue(value) else { return "must not hold line breaks or control characters" }
        return nil
    }
}
