import DaemonSettings
import ServiceSettings
import Tools

extension Settings {
    /// The headers of an `[mcp.NAME]` table for a server over Streamable HTTP, as a tool's
    /// request takes them (`headers`, `header_env`, `header_file`), with `bearer_token_env` or
    /// `bearer_token_file` for the common `Authorization: Bearer …`; errors name the key and its
    /// line. The rest of such a server (its `url`, the keys of the other kind of server, the
    /// headers the transport sets) is checked with its draft (`Settings.mcpServer`).
    static func mcpHTTPHeaders(_ section: ConfigFile.MCPSection, environment: [String: String],
                               warnings: inout [String]) throws(ConfigError) -> [ToolHeader] {
        let table = section.table
        let httpKeys: [(key: String, given: Bool)] = [
            ("bearer_token_env", section.bearer_token_env != nil), ("bearer_token_file", section.bearer_token_file != nil),
        ]
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
        return headers
    }
}
