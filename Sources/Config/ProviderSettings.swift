import ConfabProtocol
import DaemonSettings
import Posix
import ServiceSettings
import TOML
import Tools

extension Settings {
    /// A `[providers.NAME]` table, or `[upstream]` (`section.isUpstream`), checked: errors name
    /// the key and its line. `[upstream]` has fewer keys (the file's reader reads no others),
    /// OpenAI's defaults, the environment for what it leaves out (`OPENAI_BASE_URL`, systemd's
    /// `openai-api-key` credential, `OPENAI_API_KEY`), and needs no key to load (its replies
    /// fail `not_configured` instead); every check of a key it has is the one below.
    static func provider(_ section: ConfigFile.ProviderSection, environment: [String: String],
                         warnings: inout [String]) throws(ConfigError) -> Provider {
        let table = section.table
        let name = section.name
        let isUpstream = section.isUpstream
        if !isUpstream {
            guard isName(name) else { throw tableError(table, "is not a provider name: 1 to 64 letters, digits, - or _") }
            guard name != Provider.defaultName else {
                throw tableError(table, "cannot be: the provider named default is [upstream]")
            }
        }

        var config = isUpstream ? UpstreamConfig() : UpstreamConfig(model: nil, maxRetries: 2)
        let api = try providerAPI(section, config: &config)
        try readServer(section, isUpstream: isUpstream, environment: environment, into: &config)
        try readRequestSettings(section, api: api, into: &config)
        try readKey(section, api: api, isUpstream: isUpstream, environment: environment, warnings: &warnings, into: &config)
        return Provider(name: name, api: api, config: config)
    }

    /// `api`, with the keys only one API has: a typo'd api must not silently drop them.
    private static func providerAPI(_ section: ConfigFile.ProviderSection, config: inout UpstreamConfig) throws(ConfigError) -> ProviderAPI {
        let table = section.table
        let apiName = section.api ?? "chat"
        let api: ProviderAPI
        switch apiName {
        case "chat":
            api = .chat
        case "completions":
            for label in [("user_label", section.user_label), ("assistant_label", section.assistant_label)] {
                if let text = label.1, text.isEmpty || text.contains(where: \.isNewline) {
                    throw table.error(label.0, "must be a non-empty label on one line")
                }
            }
            if let stop = section.stop, stop.contains(where: \.isEmpty) {
                throw table.error("stop", "must not hold an empty string")
            }
            api = .completions(CompletionsOptions(userLabel: section.user_label ?? CompletionsOptions.defaultUserLabel,
                                                  assistantLabel: section.assistant_label ?? CompletionsOptions.defaultAssistantLabel,
                                                  stop: section.stop))
        case "anthropic":
            config.baseURL = "https://api.anthropic.com/v1"
            if let version = section.anthropic_version, version.isEmpty || !isHeaderValue(version) {
                throw table.error("anthropic_version", "must be a version such as \"\(AnthropicOptions.defaultVersion)\"")
            }
            api = .anthropic(AnthropicOptions(version: section.anthropic_version ?? AnthropicOptions.defaultVersion,
                                              promptCache: section.prompt_cache ?? true))
            config.maxTokens = AnthropicOptions.defaultMaxTokens
        case "responses":
            api = .responses
        default:
            throw table.error("api", "must be \"chat\", \"completions\", \"anthropic\" or \"responses\", not \"\(apiName)\"")
        }
        // Keys of one API only are refused elsewhere: a typo'd api must not silently drop them.
        let onlyFor: [(key: String, api: String, given: Bool)] = [
            ("user_label", "completions", section.user_label != nil), ("assistant_label", "completions", section.assistant_label != nil),
            ("stop", "completions", section.stop != nil), ("anthropic_version", "anthropic", section.anthropic_version != nil),
            ("prompt_cache", "anthropic", section.prompt_cache != nil),
            ("reasoning_pass_back", "chat", section.reasoning_pass_back != nil),
        ]
        for key in onlyFor where key.given && key.api != apiName {
            throw table.error(key.key, "is only for api = \"\(key.api)\", and this provider's api is \"\(apiName)\"")
        }

        return api
    }

    /// Where the server is and how patiently it is asked: `base_url` (for `[upstream]` also
    /// `OPENAI_BASE_URL`), `model`, the timeouts, retries and `max_tokens`.
    private static func readServer(_ section: ConfigFile.ProviderSection, isUpstream: Bool, environment: [String: String],
                                   into config: inout UpstreamConfig) throws(ConfigError) {
        let table = section.table
        if let url = section.base_url {
            guard Self.isBaseURL(url) else { throw table.error("base_url", "must start with http:// or https://") }
            config.baseURL = url
        } else if isUpstream, let url = environment["OPENAI_BASE_URL"], !url.isEmpty {
            guard Self.isBaseURL(url) else {
                throw ConfigError(description: "OPENAI_BASE_URL (for [upstream]) must start with http:// or https://")
            }
            config.baseURL = url
        }
        if let model = section.model {
            guard !model.isEmpty, model.count <= 200, !model.contains(where: \.isWhitespace) else {
                throw table.error("model", "must be 1 to 200 characters without spaces")
            }
            config.model = model
        }
        if let seconds = section.timeout_seconds {
            guard seconds > 0 else { throw table.error("timeout_seconds", "must be positive") }
            config.timeoutSeconds = seconds
        }
        if let seconds = section.connect_timeout_seconds {
            guard seconds > 0 else { throw table.error("connect_timeout_seconds", "must be positive") }
            config.connectTimeoutSeconds = seconds
        }
        if let retries = section.max_retries {
            guard (0...10).contains(retries) else { throw table.error("max_retries", "must be between 0 and 10") }
            config.maxRetries = retries
        }
        if let tokens = section.max_tokens {
            guard tokens > 0 else { throw table.error("max_tokens", "must be positive") }
            config.maxTokens = tokens
        }
    }

    /// What each request carries: temperature, reasoning, the context budget, the pass-back
    /// rule, images, and the extra headers.
    private static func readRequestSettings(_ section: ConfigFile.ProviderSection, api: ProviderAPI,
                                            into config: inout UpstreamConfig) throws(ConfigError) {
        let table = section.table
        let name = section.name
        config.temperature = section.temperature
        config.options = try requestOptions(section.reasoning, in: table, api: api, provider: name)
        if let budget = config.options.thinkingBudget, let tokens = section.max_tokens, tokens <= budget {
            throw table.error("max_tokens", "must be more than thinking_budget (\(budget)): the answer comes after the thinking")
        }
        if let effort = section.reasoning_effort {
            if api.unsupportedParameters.contains(.reasoning_effort) {
                let instead = if case .anthropic = api { ": set thinking_budget" } else { "" }
                throw table.error("reasoning_effort", "is not a parameter of the \(api.name) API\(instead)")
            }
            guard SamplingParameters.isEffortLevel(effort) else {
                throw table.error("reasoning_effort", "must be a level such as \"low\", \"medium\" or \"high\": 1 to 32 lowercase letters")
            }
            config.reasoningEffort = effort
        }
        if let tokens = section.context_tokens {
            let reply = config.maxTokens ?? ContextBudget.defaultMaxTokens
            // Otherwise every reply would fail with context_too_large.
            guard tokens > reply else {
                throw table.error("context_tokens", "must be more than the \(reply) tokens kept for the reply (max_tokens)")
            }
            config.contextTokens = tokens
        }
        if let rule = section.reasoning_pass_back {
            guard let passBack = ReasoningPassBack(rawValue: rule) else {
                throw table.error("reasoning_pass_back", "must be "
                    + ReasoningPassBack.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: " or ") + ", not \"\(rule)\"")
            }
            config.reasoningPassBack = passBack
        }
        if let vision = section.vision {
            // A completions server never gets an image: saying it takes them would be a promise not kept.
            if vision, case .completions = api {
                throw table.error("vision", "cannot be true: the completions API has no form for images")
            }
            config.takesImages = vision
        }
        if let given = section.headers, case .table(let inner)? = table.table["headers"] {
            // For errors at each header's own line.
            let headers = ConfigTable(file: table.file, path: table.name("headers"), table: inner)
            for header in given {
                guard isHeaderName(header.key) else { throw headers.error(header.key, "is not an HTTP header name") }
                guard isHeaderValue(header.value) else { throw headers.error(header.key, "must not hold line breaks or control characters") }
                config.headers.append(HTTPHeader(name: header.key, value: header.value))
            }
        }

    }

    /// The API key, from exactly one place: `api_key`, `api_key_file`, `api_key_env`, else the
    /// environment the API or `[upstream]` reads; a provider that needs one and has none fails.
    private static func readKey(_ section: ConfigFile.ProviderSection, api: ProviderAPI, isUpstream: Bool, environment: [String: String],
                                warnings: inout [String], into config: inout UpstreamConfig) throws(ConfigError) {
        let table = section.table
        let sources = [("api_key", section.api_key != nil), ("api_key_file", section.api_key_file != nil), ("api_key_env", section.api_key_env != nil)]
            .filter(\.1).map(\.0)
        if sources.count > 1 {
            throw table.error(sources[1], "cannot be given with \(sources[0]): the key comes from one place")
        }
        var keySource = "api_key"
        if let key = section.api_key {
            config.apiKey = key
        } else if let keyFile = section.api_key_file {
            keySource = "api_key_file"
            do {
                config.apiKey = try readText(keyFile, "the key file").trimmingWhitespace
            } catch {
                throw table.error("api_key_file", "cannot be used: \(error)")
            }
            if isReadableByOthers(keyFile) {
                warnings.append("the API key file \(keyFile) (\(table.name("api_key_file"))) can be read by others: chmod 600 \(keyFile)")
            }
        } else if let variable = section.api_key_env {
            keySource = "api_key_env"
            guard !variable.isEmpty else { throw table.error("api_key_env", "must name an environment variable") }
            config.apiKey = environment[variable].flatMap { $0.isEmpty ? nil : $0 }
            if config.apiKey == nil {
                throw table.error("api_key_env", "names \(variable), which is not set in confabd's environment")
            }
        } else if case .anthropic = api {
            keySource = "ANTHROPIC_API_KEY"
            config.apiKey = environment["ANTHROPIC_API_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        } else if isUpstream, let key = try credential("openai-api-key", environment: environment) {
            // systemd's LoadCredential=openai-api-key:… (confabd.service).
            keySource = "the openai-api-key credential"
            config.apiKey = key
        } else if isUpstream, let key = environment["OPENAI_API_KEY"], !key.isEmpty {
            keySource = "OPENAI_API_KEY"
            config.apiKey = key
        }
        if let key = config.apiKey, !isHeaderValue(key) {
            let problem = "holds a key with line breaks or control characters"
            switch keySource {
            case "api_key", "api_key_file", "api_key_env": throw table.error(keySource, problem)
            case "ANTHROPIC_API_KEY": throw table.error("api_key", problem)
            default: throw ConfigError(description: "\(keySource) (for [upstream]) \(problem)")
            }
        }
        // Anthropic always wants a key; a chat or completions server elsewhere than this
        // machine almost always does, and `api_key = ""` says it does not.
        // [upstream] loads without one, as it always has: its replies fail with not_configured.
        let needsKey: Bool = if isUpstream { false } else if case .anthropic = api { true } else { !isLoopback(config.baseURL) && section.api_key == nil }
        if needsKey, (config.apiKey ?? "").isEmpty {
            if section.api_key != nil || section.api_key_file != nil {
                throw table.error(keySource, "gives an empty key, and this provider needs one")
            }
            let fallback = if case .anthropic = api { ", or ANTHROPIC_API_KEY in confabd's environment" } else { " (api_key = \"\" for a server that takes none)" }
            throw tableError(table, "needs an API key: set api_key, api_key_file or api_key_env\(fallback)")
        }
    }

    /// An error about the table as a whole, put at its header.
    private static func tableError(_ table: ConfigTable, _ problem: String) -> ConfigError {
        let line = (table.position ?? table.table.members.first?.position).map { "\($0): " } ?? ""
        return ConfigError(description: "\(table.file): \(line)\(table.path) \(problem)")
    }

    static func isBaseURL(_ url: String) -> Bool {
        (url.hasPrefix("http://") || url.hasPrefix("https://")) && isHeaderValue(url) && !url.contains(" ")
    }
}
