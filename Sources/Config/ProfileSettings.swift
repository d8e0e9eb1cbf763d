import ConfabProtocol
import DaemonSettings
import Posix
import ServiceSettings
import TOML
import Tools

extension Settings {
    /// A `[profiles.NAME]` table, checked against the providers: errors name the key and its line.
    static func profile(_ section: ConfigFile.ProfileSection, providers: ProviderTable, tools: ToolTable,
                        mcpServers: [MCPServerSettings] = []) throws(ConfigError) -> Profile {
        let table = section.table
        let name = section.name
        guard isName(name) else {
            let line = (table.position ?? table.table.members.first?.position).map { "\($0): " } ?? ""
            throw ConfigError(description: "\(table.file): \(line)\(table.path) is not a profile name: 1 to 64 letters, digits, - or _")
        }
        let providerName = section.provider ?? providers.defaultName
        guard let provider = providers[providerName] else {
            throw table.error("provider", "names no configured provider: \"\(providerName)\" (there are: \(providers.names.joined(separator: ", ")))")
        }
        if let model = section.model, model.isEmpty || model.count > 200 || model.contains(where: \.isWhitespace) {
            throw table.error("model", "must be 1 to 200 characters without spaces")
        }
        if let found = section.params.problem() {
            throw table.error(found.key.rawValue, found.problem)
        }
        for key in section.params.keys where provider.api.unsupportedParameters.contains(key) {
            throw table.error(key.rawValue, "is not a parameter of the \(provider.api.name) API, which provider \"\(provider.name)\" speaks")
        }
        let options = try requestOptions(section.reasoning, in: table, api: provider.api, provider: provider.name)
        let budget = options.thinkingBudget ?? (options.thinking == false ? nil : provider.config.options.thinkingBudget)
        if let budget, let tokens = section.params.maxTokens, tokens <= budget {
            throw table.error("max_tokens", "must be more than thinking_budget (\(budget)): the answer comes after the thinking")
        }
        for key in [("welcome", section.welcome), ("quick_replies", section.quick_replies)] {
            if let texts = key.1, texts.contains(where: { $0.trimmingWhitespace.isEmpty }) {
                throw table.error(key.0, "must not hold an empty string")
            }
        }
        if let tokens = section.context_tokens {
            let reply = section.params.maxTokens ?? provider.config.maxTokens ?? ContextBudget.defaultMaxTokens
            // Otherwise every reply would fail with context_too_large.
            guard tokens > reply else {
                throw table.error("context_tokens", "must be more than the \(reply) tokens kept for the reply (max_tokens)")
            }
        }
        // Quick replies are offered under the last welcome message: with none, nothing would show them.
        if section.quick_replies?.isEmpty == false, section.welcome?.isEmpty ?? true {
            throw table.error("quick_replies", "needs a welcome message to be offered under")
        }
        // A profile's `vision` is over its provider's (one server may serve models that see and
        // models that do not), except for a completions provider, whose API has no form for images.
        if section.vision == true, case .completions = provider.api {
            throw table.error("vision", "cannot be true with provider \"\(provider.name)\": the completions API has no form for images")
        }
        let toolNames = section.tools ?? []
        if !toolNames.isEmpty, case .completions = provider.api {
            throw table.error("tools", "cannot be used with provider \"\(provider.name)\": the completions API has no tool calls")
        }
        var listed: Set<String> = []
        for tool in toolNames {
            // An HTTP tool, an MCP server (all its tools) or one tool of a server (`server.tool`).
            let entry = QualifiedToolName(tool)
            if tools[tool] == nil, !entry.isWellFormed {
                throw table.error("tools", tool.isEmpty ? "names an empty tool"
                                  : "names \"\(tool)\": a server's name must come before the dot and a tool's name after it")
            }
            if tools[tool] == nil, let server = mcpServers.first(where: { $0.name == entry.space }) {
                if let one = entry.tool, let offered = server.tools, !offered.contains(one) {
                    throw table.error("tools", "names \"\(tool)\", which is not among the tools [mcp.\(server.name)] offers: \(offered.joined(separator: ", "))")
                }
            } else if tools[tool] == nil {
                let known = tools.names + mcpServers.map(\.name)
                throw table.error("tools", "names no configured tool\(mcpServers.isEmpty ? "" : " or MCP server"): \"\(tool)\"" + (known.isEmpty ? " (there are none)" : " (there are: \(known.joined(separator: ", ")))"))
            }
            guard listed.insert(tool).inserted else { throw table.error("tools", "names \"\(tool)\" twice") }
        }
        var profile = Profile(name: name, provider: provider.name, model: section.model, system: section.system,
                              params: section.params, welcome: section.welcome ?? [], quickReplies: section.quick_replies ?? [],
                              contextTokens: section.context_tokens, tools: toolNames)
        profile.takesImages = section.vision
        profile.options = options
        profile.compaction = try compactionSettings(section, provider: provider)
        return profile
    }
}

extension Settings {
    /// `compact_model`, `compact_prompt` and `compact_at`: a summary before a reply needs a budget to measure against.
    static func compactionSettings(_ section: ConfigFile.ProfileSection, provider: Provider) throws(ConfigError) -> CompactionSettings {
        let table = section.table
        if let model = section.compact_model, model.isEmpty || model.count > 200 || model.contains(where: \.isWhitespace) {
            throw table.error("compact_model", "must be 1 to 200 characters without spaces")
        }
        if let prompt = section.compact_prompt, prompt.trimmingWhitespace.isEmpty {
            throw table.error("compact_prompt", "must not be empty")
        }
        if let at = section.compact_at {
            guard at > 0, at < 1 else { throw table.error("compact_at", "must be a fraction of context_tokens, above 0 and below 1, not \(at)") }
            guard section.context_tokens ?? provider.config.contextTokens != nil else {
                throw table.error("compact_at", "needs context_tokens (in the profile or its provider): it is a fraction of it")
            }
        }
        return CompactionSettings(model: section.compact_model, prompt: section.compact_prompt, at: section.compact_at)
    }
}
