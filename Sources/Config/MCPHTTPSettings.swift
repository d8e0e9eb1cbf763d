import DaemonSettings
import ServiceSettings
import Tools

extension Settings {
    /// The keys of an `[mcp.NAME]` table for a server over Streamable HTTP: `url` (http or
    /// https), and the headers its requests carry, as a tool's request takes them (`headers`,
    /// `header_env`, `header_file`), with `bearer_token_env` or `bearer_token_file` for the
    /// common `Authorization: Bearer …`. nil for a server run with `command`; errors name the
    /// key and its line, and a key of the other kind of server given with either.
    static func mcpHTTPEndpoint(_ section: ConfigFile.MCPSection, environment: [String: String],
                                warnings: inout [String]) throws(ConfigError) -> MCPHTTPEndpoint? {
        let table = section.table
        let httpKeys: [(key: String, given: Bool)] = [
            ("headers", section.headers != nil), ("header_env", section.header_env != nil), ("header_file", section.header_file != nil),
            ("bearer_token_env", section.bearer_token_env != nil), ("bearer_token_file", section.bearer_token_file != nil),
        ]
        guard let url = section.url else {
            if let key = httpKeys.first(where: \.given)?.key {
                throw table.error(key, "is for a server over HTTP (url); this one is run with command")
            }
            return nil
        }
        if section.command != nil {
            throw table.error("url", "cannot be given with command: a server is either run (command) or reached over HTTP (url)")
        }
        let processKeys: [(key: String, given: Bool)] = [("args", section.args != nil), ("env", section.env != nil), ("cwd", section.cwd != nil)]
        if let key = processKeys.first(where: \.given)?.key {
            throw table.error(key, "is for a server run with command; this one is reached over HTTP (url)")
        }
        let lower = url.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), url.utf8.count <= 2048, isHeaderValue(url), !url.contains(" ") else {
            throw table.error("url", "must be an http:// or https:// URL without spaces or control characters")
        }
        guard !url.contains("#") else { throw table.error("url", "must not hold a fragment (#…): it is never sent") }
        var headers = try Self.headers(in: table, from: [
            ("headers", section.headers), ("header_env", section.header_env), ("header_file", section.header_file),
        ], environment: environment, warnings: &warnings)

        if section.bearer_token_env != nil, section.bearer_token_file != nil {
            throw table.error("bearer_token_file", "cannot be given with bearer_token_env: the token comes from one place")
        }
        if let key = ["bearer_token_env", "bearer_token_file"].first(where: { key in httpKeys.contains { $0.key == key && $0.given } }) {
            if headers.contains(where: { $0.name.lowercased() == "authorization" }) {
                throw table.error(key, "cannot be given with an Authorization header: the header comes from one place")
            }
            let token: String
            if let variable = section.bearer_token_env {
                guard !variable.isEmpty else { throw table.error(key, "must name an environment variable") }
                guard let value = environment[variable], !value.isEmpty else {
                    throw table.error(key, "names \(variable), which is not set in confabd's environment")
                }
                token = value
            } else {
                let path = section.bearer_token_file ?? ""
                do {
                    token = try readText(path, "the token file").trimmingWhitespace
                } catch {
                    throw table.error(key, "cannot be used: \(error)")
                }
                guard !token.isEmpty else { throw table.error(key, "names \(path), which holds an empty token") }
                if isReadableByOthers(path) {
                    warnings.append("the token file \(path) (\(table.name(key))) can be read by others: chmod 600 \(path)")
                }
            }
            guard isHeaderValue(token), !token.contains(" ") else {
                throw table.error(key, "gives a token with spaces, line breaks or control characters")
            }
            headers.append(ToolHeader(name: "Authorization", value: "Bearer \(token)", isSecret: true))
        }
        for reserved in ["accept", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"] {
            if let header = headers.first(where: { $0.name.lowercased() == reserved }) {
                throw table.error("headers", "sets \(header.name), which the transport sets itself")
            }
        }
        return MCPHTTPEndpoint(url: url, headers: headers)
    }
}
