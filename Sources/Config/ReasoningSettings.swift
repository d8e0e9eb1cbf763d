import ConfabProtocol
import DaemonSettings
import ServiceSettings
import TOML

extension Settings {
    /// The reasoning and request-body keys of a provider's or profile's table, checked against
    /// the API the provider speaks: errors name the key and its line.
    static func requestOptions(_ keys: ConfigFile.ReasoningKeys, in table: ConfigTable, api: ProviderAPI,
                               provider: String) throws(ConfigError) -> RequestOptions {
        var options = RequestOptions()
        func onlyFor(_ key: String, _ names: [String]) throws(ConfigError) {
            guard !names.contains(api.name) else { return }
            let list = names.map { "\"\($0)\"" }.joined(separator: " or ")
            throw table.error(key, "is only for api = \(list), and provider \"\(provider)\" speaks \"\(api.name)\"")
        }
        if let format = keys.reasoning_format {
            try onlyFor("reasoning_format", ["chat"])
            guard let known = ReasoningFormat(rawValue: format) else {
                throw table.error("reasoning_format", "must be \"openai\" (reasoning_effort) or \"openrouter\" (a reasoning object), not \"\(format)\"")
            }
            options.reasoningFormat = known
        }
        if let field = keys.max_tokens_field {
            try onlyFor("max_tokens_field", ["chat"])
            guard let known = MaxTokensField(rawValue: field) else {
                throw table.error("max_tokens_field", "must be \"max_tokens\" or \"max_completion_tokens\", not \"\(field)\"")
            }
            options.maxTokensField = known
        }
        if let budget = keys.thinking_budget {
            try onlyFor("thinking_budget", ["anthropic"])
            guard budget >= RequestOptions.minimumThinkingBudget else {
                throw table.error("thinking_budget", "must be at least \(RequestOptions.minimumThinkingBudget) tokens (the API refuses less)")
            }
            if keys.thinking == false {
                throw table.error("thinking", "cannot be false with thinking_budget, which turns thinking on")
            }
            options.thinkingBudget = budget
        }
        if let thinking = keys.thinking {
            switch api {
            case .completions:
                throw table.error("thinking", "has no switch in the completions API: use extra_body for the server's own")
            case .anthropic where thinking && keys.thinking_budget == nil:
                throw table.error("thinking", "= true needs thinking_budget: Anthropic thinks within a budget of tokens")
            case .responses where !thinking:
                throw table.error("thinking", "= false has no switch in the Responses API: set reasoning_effort to the least the model takes (\"minimal\" or \"none\")")
            default:
                options.thinking = thinking
            }
        }
        if let value = keys.extra_body {
            guard case .table(let inner) = value else {
                throw table.error("extra_body", "must be a table, not \(value.kindDescription)")
            }
            let names = ConfigTable(file: table.file, path: table.name("extra_body"), table: inner)
            let own = api.ownBodyKeys
            for member in inner.members {
                if own.contains(member.key) {
                    let setting = ProviderAPI.setting(writing: member.key).map { ": set it with \($0)" } ?? ""
                    throw names.error(member.key, "is a key confab sets itself in the \(api.name) API's requests\(setting)")
                }
                let json = try json(from: TOMLTable(members: [member]), file: table.file, path: table.name("extra_body"))
                options.extraBody.append(ExtraBodyMember(key: member.key, value: json[member.key] ?? .null))
            }
        }
        return options
    }
}
