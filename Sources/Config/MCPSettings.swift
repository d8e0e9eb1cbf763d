import DaemonSettings
import ServiceSettings
import TOML
import Tools

extension ConfigFile.MCPSection {
    /// The table as a draft (`MCPServerDraft`), its headers read from where a table takes them
    /// (`Settings.mcpHTTPHeaders`): errors name the key and its line.
    func draft(environment: [String: String], warnings: inout [String]) throws(ConfigError) -> MCPServerDraft {
        var draft = MCPServerDraft(name: name, place: .table(table))
        draft.command = command
        draft.args = args
        draft.env = env
        draft.cwd = cwd
        draft.approval = approval
        draft.tools = tools
        draft.timeoutSeconds = timeout_seconds
        draft.startupTimeoutSeconds = startup_timeout_seconds
        draft.start = start
        draft.toolApproval = tool_approval
        draft.url = url
        let httpKeys: [(key: String, given: Bool)] = [
            ("headers", headers != nil), ("header_env", header_env != nil), ("header_file", header_file != nil),
            ("bearer_token_env", bearer_token_env != nil), ("bearer_token_file", bearer_token_file != nil),
        ]
        draft.httpKeys = httpKeys.filter(\.given).map(\.key)
        if url != nil, command == nil {
            draft.headers = try Settings.mcpHTTPHeaders(self, environment: environment, warnings: &warnings)
        }
        return draft
    }
}
