import Broker
import ConfabProtocol
import Posix
import TOML
import Tools
import Upstream
#if canImport(Glibc)
import Glibc
#endif

extension ConfigTable {
    /// `context_tokens`, the same in every table that has it: a whole number of tokens, big
    /// enough for a system prompt and a short question.
    mutating func contextTokens() throws(ConfigError) -> Int? {
        guard let tokens = try integer("context_tokens") else { return nil }
        guard tokens >= ContextBudget.minimumTokens else {
            throw error("context_tokens", "must be at least \(ContextBudget.minimumTokens) tokens, not \(tokens)")
        }
        return tokens
    }
}

/// `config.toml`, as documented in the README, as written: nothing checked but the types.
struct ConfigFile {
    struct UpstreamSection {
        var base_url: String?
        var model: String?
        var api_key: String?
        var api_key_file: String?
        var timeout_seconds: Int?
        var connect_timeout_seconds: Int?
        var temperature: Double?
        var max_tokens: Int?
        var max_retries: Int?
        var context_tokens: Int?
    }
    struct LimitsSection {
        var table: ConfigTable
        var max_line_bytes: Int?
        var max_client_buffer_bytes: Int?
        var max_clients: Int?
        var max_queued_sends: Int?
        var max_streams: Int?
        var unload_idle_seconds: Int?
        var max_tool_rounds: Int?
        var tool_approval_timeout_seconds: Int?
        var max_unanswered_requests: Int?
    }
    /// One `[providers.NAME]` table, with the table itself for errors at its keys' lines.
    struct ProviderSection {
        var name: String
        var table: ConfigTable
        var api: String?
        var base_url: String?
        var api_key: String?
        var api_key_file: String?
        var api_key_env: String?
        var timeout_seconds: Int?
        var connect_timeout_seconds: Int?
        var max_retries: Int?
        var headers: [(key: String, value: String)]?
        var model: String?
        var max_tokens: Int?
        var user_label: String?
        var assistant_label: String?
        var stop: [String]?
        var anthropic_version: String?
        var context_tokens: Int?
    }
    /// One `[profiles.NAME]` table, with the table itself for errors at its keys' lines.
    struct ProfileSection {
        var name: String
        var table: ConfigTable
        var provider: String?
        var model: String?
        var system: String?
        var params: SamplingParameters
        var welcome: [String]?
        var quick_replies: [String]?
        var context_tokens: Int?
        var tools: [String]?
    }
    /// One `[tools.NAME]` table, with the table itself for errors at its keys' lines.
    struct ToolSection {
        var name: String
        var table: ConfigTable
        var description: String?
        /// A JSON Schema written in TOML: converted when checked, for errors at nested lines.
        var parameters: TOMLValue?
        var parameters_file: String?
        var approval: String?
        var request: ToolRequestSection?
    }
    /// `[tools.NAME.request]`, or `request = {…}`.
    struct ToolRequestSection {
        var table: ConfigTable
        var method: String?
        var url: String?
        var headers: [(key: String, value: String)]?
        var header_env: [(key: String, value: String)]?
        var header_file: [(key: String, value: String)]?
        var timeout_seconds: Int?
        var max_response_bytes: Int?
    }
    var upstream: UpstreamSection?
    var providers: [ProviderSection] = []
    var default_provider: String?
    var profiles: [ProfileSection] = []
    var default_profile: String?
    var tools: [ToolSection] = []
    var limits: LimitsSection?
    var fsync: Bool?
    var allow_uids: [Int]?
    /// The document itself, for errors at its top-level keys' lines.
    var root: ConfigTable?

    /// Unknown keys are errors: a typo should not silently leave a default in place.
    init(_ document: TOMLTable, file: String) throws(ConfigError) {
        var root = ConfigTable(file: file, table: document)
        upstream = try root.table("upstream") { (table: inout ConfigTable) throws(ConfigError) in
            UpstreamSection(
                base_url: try table.string("base_url"),
                model: try table.string("model"),
                api_key: try table.string("api_key"),
                api_key_file: try table.string("api_key_file"),
                timeout_seconds: try table.integer("timeout_seconds"),
                connect_timeout_seconds: try table.integer("connect_timeout_seconds"),
                temperature: try table.number("temperature"),
                max_tokens: try table.integer("max_tokens"),
                max_retries: try table.integer("max_retries"),
                context_tokens: try table.contextTokens())
        }
        providers = try root.tables("providers") { (name: String, table: inout ConfigTable) throws(ConfigError) in
            ProviderSection(
                name: name, table: table,
                api: try table.string("api"),
                base_url: try table.string("base_url"),
                api_key: try table.string("api_key"),
                api_key_file: try table.string("api_key_file"),
                api_key_env: try table.string("api_key_env"),
                timeout_seconds: try table.integer("timeout_seconds"),
                connect_timeout_seconds: try table.integer("connect_timeout_seconds"),
                max_retries: try table.integer("max_retries"),
                headers: try table.stringTable("headers"),
                model: try table.string("model"),
                max_tokens: try table.integer("max_tokens"),
                user_label: try table.string("user_label"),
                assistant_label: try table.string("assistant_label"),
                stop: try table.strings("stop"),
                anthropic_version: try table.string("anthropic_version"),
                context_tokens: try table.contextTokens())
        } ?? []
        default_provider = try root.string("default_provider")
        profiles = try root.tables("profiles") { (name: String, table: inout ConfigTable) throws(ConfigError) in
            ProfileSection(
                name: name, table: table,
                provider: try table.string("provider"),
                model: try table.string("model"),
                system: try table.string("system"),
                params: SamplingParameters(
                    temperature: try table.number("temperature"),
                    topP: try table.number("top_p"),
                    maxTokens: try table.integer("max_tokens"),
                    presencePenalty: try table.number("presence_penalty"),
                    frequencyPenalty: try table.number("frequency_penalty"),
                    stop: try table.strings("stop"),
                    seed: try table.integer("seed")),
                welcome: try table.strings("welcome"),
                quick_replies: try table.strings("quick_replies"),
                context_tokens: try table.contextTokens(),
                tools: try table.strings("tools"))
        } ?? []
        default_profile = try root.string("default_profile")
        tools = try root.tables("tools") { (name: String, table: inout ConfigTable) throws(ConfigError) in
            ToolSection(
                name: name, table: table,
                description: try table.string("description"),
                parameters: table.untyped("parameters"),
                parameters_file: try table.string("parameters_file"),
                approval: try table.string("approval"),
                request: try table.table("request") { (request: inout ConfigTable) throws(ConfigError) in
                    ToolRequestSection(
                        table: request,
                        method: try request.string("method"),
                        url: try request.string("url"),
                        headers: try request.stringTable("headers"),
                        header_env: try request.stringTable("header_env"),
                        header_file: try request.stringTable("header_file"),
                        timeout_seconds: try request.integer("timeout_seconds"),
                        max_response_bytes: try request.integer("max_response_bytes"))
                })
        } ?? []
        limits = try root.table("limits") { (table: inout ConfigTable) throws(ConfigError) in
            LimitsSection(
                table: table,
                max_line_bytes: try table.integer("max_line_bytes"),
                max_client_buffer_bytes: try table.integer("max_client_buffer_bytes"),
                max_clients: try table.integer("max_clients"),
                max_queued_sends: try table.integer("max_queued_sends"),
                max_streams: try table.integer("max_streams"),
                unload_idle_seconds: try table.integer("unload_idle_seconds"),
                max_tool_rounds: try table.integer("max_tool_rounds"),
                tool_approval_timeout_seconds: try table.integer("tool_approval_timeout_seconds"),
                max_unanswered_requests: try table.integer("max_unanswered_requests"))
        }
        fsync = try root.table("storage") { (table: inout ConfigTable) throws(ConfigError) in try table.boolean("fsync") } ?? nil
        allow_uids = try root.table("access") { (table: inout ConfigTable) throws(ConfigError) in
            guard let uids = try table.integers("allow_uids") else { return nil }
            let overflow = UserAccount.overflowUID
            for uid in uids {
                guard uid >= 0, uid < Int(UInt32.max) else { throw table.error("allow_uids", "holds \(uid), which is not a uid") }
                // Under PrivateUsers=yes every user the daemon cannot map arrives as this uid:
                // listing it would let every local user in.
                guard uid != Int(overflow) else {
                    throw table.error("allow_uids", "holds \(uid), the overflow uid (/proc/sys/kernel/overflowuid): under systemd's PrivateUsers=yes every other local user arrives as it, so it would let them all in; run confabd without PrivateUsers=yes and list the real uids")
                }
            }
            return uids
        } ?? nil
        try root.rejectUnknownKeys()
        self.root = root
    }

    init() {}
}

/// Everything the daemon takes from its config file and environment.
public struct Settings {
    /// `[upstream]`: the provider named `default`.
    public var upstream = UpstreamConfig()
    /// `[providers.NAME]` tables, in the order written.
    public var providers: [Provider] = []
    /// Which provider a new conversation that names none uses.
    public var defaultProvider = Provider.defaultName
    /// `[profiles.NAME]` tables, in the order written.
    public var profiles: [Profile] = []
    /// Which profile a new conversation that names none uses; nil: none.
    public var defaultProfile: String?
    /// `[tools.NAME]` tables: HTTP tools a profile's conversations may let the model call.
    public var tools = ToolTable()
    public var limits = BrokerLimits()
    public var fsync = true
    public var allowedUIDs: Set<UInt32> = []
    public var warnings: [String] = []

    public init() {}

    /// Every provider, `[upstream]` as `default` among them.
    public var providerTable: ProviderTable {
        ProviderTable([Provider(name: Provider.defaultName, config: upstream)] + providers, defaultName: defaultProvider)
    }

    public var profileTable: ProfileTable {
        ProfileTable(profiles, defaultName: defaultProfile)
    }

    /// Every configured secret: each provider's API key (`[upstream]`'s among them) and the
    /// value of each tool header read from the environment or a file.
    public var secrets: SecretRedactor {
        let keys = ([upstream] + providers.map(\.config)).compactMap(\.apiKey)
        let headers = tools.sorted.flatMap(\.headers).filter(\.isSecret).map(\.value)
        return SecretRedactor(secrets: keys + headers)
    }

    /// Reads `path` (a missing file is fine unless `required`) and the environment.
    public static func load(path: String, required: Bool, environment: [String: String]) throws(ConfigError) -> Settings {
        var info = stat()
        guard stat(path, &info) == 0 else {
            guard !required && errno == ENOENT else {
                throw ConfigError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            return try resolve(ConfigFile(), environment: environment)
        }
        let file = try parse(readText(path, "config file"), path: path)
        var settings = try resolve(file, environment: environment)
        if file.upstream?.api_key != nil || file.providers.contains(where: { $0.api_key?.isEmpty == false }), info.st_mode & 0o077 != 0 {
            settings.warnings.insert("\(path) holds an API key and can be read by others: chmod 600 \(path)", at: 0)
        }
        return settings
    }

    /// The settings `text` (the contents of the file at `path`) gives with `environment`.
    public static func load(text: String, path: String, environment: [String: String]) throws(ConfigError) -> Settings {
        try resolve(parse(text, path: path), environment: environment)
    }

    private static func parse(_ text: String, path: String) throws(ConfigError) -> ConfigFile {
        let document: TOMLTable
        do {
            document = try TOMLTable(parsing: text)
        } catch {
            throw ConfigError(description: "\(path): \(error)")
        }
        return try ConfigFile(document, file: path)
    }

    /// Checks the file's values and fills in what it leaves out from the environment.
    private static func resolve(_ file: ConfigFile, environment: [String: String]) throws(ConfigError) -> Settings {
        var settings = Settings()
        let upstream = file.upstream
        if let url = upstream?.base_url ?? environment["OPENAI_BASE_URL"], !url.isEmpty {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw ConfigError(description: "upstream.base_url must start with http:// or https://")
            }
            settings.upstream.baseURL = url
        }
        if let model = upstream?.model { settings.upstream.model = model }
        if let key = upstream?.api_key {
            settings.upstream.apiKey = key
        } else if let keyFile = upstream?.api_key_file {
            let key = try readText(keyFile, "upstream.api_key_file")
            settings.upstream.apiKey = key.trimmingWhitespace
            // As ssh does for private keys; the key itself is never part of the message.
            var keyInfo = stat()
            if stat(keyFile, &keyInfo) == 0, keyInfo.st_mode & S_IFMT == S_IFREG, keyInfo.st_mode & 0o044 != 0 {
                settings.warnings.append("the API key file \(keyFile) (upstream.api_key_file) can be read by others: chmod 600 \(keyFile)")
            }
        } else if let key = try credential("openai-api-key", environment: environment) {
            // systemd's LoadCredential=openai-api-key:… (confabd.service).
            settings.upstream.apiKey = key
        } else if let key = environment["OPENAI_API_KEY"], !key.isEmpty {
            settings.upstream.apiKey = key
        }
        if let seconds = upstream?.timeout_seconds {
            guard seconds > 0 else { throw ConfigError(description: "upstream.timeout_seconds must be positive") }
            settings.upstream.timeoutSeconds = seconds
        }
        if let seconds = upstream?.connect_timeout_seconds {
            guard seconds > 0 else { throw ConfigError(description: "upstream.connect_timeout_seconds must be positive") }
            settings.upstream.connectTimeoutSeconds = seconds
        }
        settings.upstream.temperature = upstream?.temperature
        settings.upstream.maxTokens = upstream?.max_tokens
        settings.upstream.contextTokens = upstream?.context_tokens

        func positive(_ value: Int?, _ name: String) throws(ConfigError) -> Int? {
            guard let value else { return nil }
            guard value > 0 else { throw ConfigError(description: "limits.\(name) must be positive") }
            return value
        }
        if let value = try positive(file.limits?.max_line_bytes, "max_line_bytes") { settings.limits.maxLineBytes = value }
        if let value = try positive(file.limits?.max_client_buffer_bytes, "max_client_buffer_bytes") { settings.limits.maxClientBufferBytes = value }
        if let value = try positive(file.limits?.max_clients, "max_clients") { settings.limits.maxClients = value }
        if let value = try positive(file.limits?.max_queued_sends, "max_queued_sends") { settings.limits.maxQueuedSends = value }
        if let value = try positive(file.limits?.max_streams, "max_streams") { settings.limits.maxStreams = value }
        if let value = try positive(file.limits?.max_unanswered_requests, "max_unanswered_requests") {
            settings.limits.maxUnansweredPerClient = value
        }
        if let value = try positive(file.limits?.unload_idle_seconds, "unload_idle_seconds") {
            settings.limits.unloadIdleMilliseconds = UInt64(value) * 1000
        }
        if let limits = file.limits {
            for (key, value, range) in [("max_tool_rounds", limits.max_tool_rounds, 1...100),
                                        ("tool_approval_timeout_seconds", limits.tool_approval_timeout_seconds, 1...86400)] {
                if let value, !range.contains(value) {
                    throw limits.table.error(key, "must be between \(range.lowerBound) and \(range.upperBound)")
                }
            }
            if let rounds = limits.max_tool_rounds { settings.limits.maxToolRounds = rounds }
            if let seconds = limits.tool_approval_timeout_seconds { settings.limits.toolApprovalTimeoutSeconds = seconds }
        }
        if let retries = upstream?.max_retries {
            guard (0...10).contains(retries) else { throw ConfigError(description: "upstream.max_retries must be between 0 and 10") }
            settings.upstream.maxRetries = retries
        }
        for section in file.providers {
            settings.providers.append(try provider(section, environment: environment, warnings: &settings.warnings))
        }
        if let name = file.default_provider {
            let known = [Provider.defaultName] + settings.providers.map(\.name)
            guard known.contains(name) else {
                let problem = "names no configured provider: \"\(name)\" (there are: \(known.joined(separator: ", ")))"
                throw file.root?.error("default_provider", problem) ?? ConfigError(description: "default_provider \(problem)")
            }
            settings.defaultProvider = name
        }
        var tools: [ToolDefinition] = []
        for section in file.tools {
            tools.append(try tool(section, environment: environment, warnings: &settings.warnings))
        }
        settings.tools = ToolTable(tools)
        let table = settings.providerTable
        for section in file.profiles {
            settings.profiles.append(try profile(section, providers: table, tools: settings.tools))
        }
        if let name = file.default_profile {
            guard settings.profiles.contains(where: { $0.name == name }) else {
                let known = settings.profiles.map(\.name)
                let problem = "names no configured profile: \"\(name)\"" + (known.isEmpty ? " (there are none)" : " (there are: \(known.joined(separator: ", ")))")
                throw file.root?.error("default_profile", problem) ?? ConfigError(description: "default_profile \(problem)")
            }
            settings.defaultProfile = name
        }
        settings.fsync = file.fsync ?? true
        settings.allowedUIDs = Set((file.allow_uids ?? []).compactMap { UInt32(exactly: $0) })
        return settings
    }

    /// A `[providers.NAME]` table, checked: errors name the key and its line.
    private static func provider(_ section: ConfigFile.ProviderSection, environment: [String: String],
                                 warnings: inout [String]) throws(ConfigError) -> Provider {
        let table = section.table
        let name = section.name
        // Errors about the table as a whole are put at its header.
        func tableError(_ problem: String) -> ConfigError {
            let line = (table.position ?? table.table.members.first?.position).map { "\($0): " } ?? ""
            return ConfigError(description: "\(table.file): \(line)\(table.path) \(problem)")
        }
        guard isName(name) else { throw tableError("is not a provider name: 1 to 64 letters, digits, - or _") }
        guard name != Provider.defaultName else {
            throw tableError("cannot be: the provider named default is [upstream]")
        }

        let apiName = section.api ?? "chat"
        var config = UpstreamConfig(model: nil, maxRetries: 2)
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
            api = .anthropic(AnthropicOptions(version: section.anthropic_version ?? AnthropicOptions.defaultVersion))
            config.maxTokens = AnthropicOptions.defaultMaxTokens
        default:
            throw table.error("api", "must be \"chat\", \"completions\" or \"anthropic\", not \"\(apiName)\"")
        }
        // Keys of one API only are refused elsewhere: a typo'd api must not silently drop them.
        let onlyFor: [(key: String, api: String, given: Bool)] = [
            ("user_label", "completions", section.user_label != nil), ("assistant_label", "completions", section.assistant_label != nil),
            ("stop", "completions", section.stop != nil), ("anthropic_version", "anthropic", section.anthropic_version != nil),
        ]
        for key in onlyFor where key.given && key.api != apiName {
            throw table.error(key.key, "is only for api = \"\(key.api)\", and this provider's api is \"\(apiName)\"")
        }

        if let url = section.base_url {
            guard url.hasPrefix("http://") || url.hasPrefix("https://"), isHeaderValue(url), !url.contains(" ") else {
                throw table.error("base_url", "must start with http:// or https://")
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
        if let tokens = section.context_tokens {
            let reply = config.maxTokens ?? ContextBudget.defaultMaxTokens
            // Otherwise every reply would fail with context_too_large.
            guard tokens > reply else {
                throw table.error("context_tokens", "must be more than the \(reply) tokens kept for the reply (max_tokens)")
            }
            config.contextTokens = tokens
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
            var keyInfo = stat()
            if stat(keyFile, &keyInfo) == 0, keyInfo.st_mode & S_IFMT == S_IFREG, keyInfo.st_mode & 0o044 != 0 {
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
        }
        if let key = config.apiKey, !isHeaderValue(key) {
            throw table.error(keySource == "ANTHROPIC_API_KEY" ? "api_key" : keySource, "holds a key with line breaks or control characters")
        }
        // Anthropic always wants a key; a chat or completions server elsewhere than this
        // machine almost always does, and `api_key = ""` says it does not.
        let needsKey: Bool = if case .anthropic = api { true } else { !isLoopback(config.baseURL) && section.api_key == nil }
        if needsKey, (config.apiKey ?? "").isEmpty {
            if section.api_key != nil || section.api_key_file != nil {
                throw table.error(keySource, "gives an empty key, and this provider needs one")
            }
            let fallback = if case .anthropic = api { ", or ANTHROPIC_API_KEY in confabd's environment" } else { " (api_key = \"\" for a server that takes none)" }
            throw tableError("needs an API key: set api_key, api_key_file or api_key_env\(fallback)")
        }
        return Provider(name: name, api: api, config: config)
    }

    /// A `[profiles.NAME]` table, checked against the providers: errors name the key and its line.
    private static func profile(_ section: ConfigFile.ProfileSection, providers: ProviderTable, tools: ToolTable) throws(ConfigError) -> Profile {
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
        let toolNames = section.tools ?? []
        if !toolNames.isEmpty, case .completions = provider.api {
            throw table.error("tools", "cannot be used with provider \"\(provider.name)\": the completions API has no tool calls")
        }
        var listed: Set<String> = []
        for tool in toolNames {
            guard tools[tool] != nil else {
                let known = tools.names
                throw table.error("tools", "names no configured tool: \"\(tool)\"" + (known.isEmpty ? " (there are none)" : " (there are: \(known.joined(separator: ", ")))"))
            }
            guard listed.insert(tool).inserted else { throw table.error("tools", "names \"\(tool)\" twice") }
        }
        return Profile(name: name, provider: provider.name, model: section.model, system: section.system,
                       params: section.params, welcome: section.welcome ?? [], quickReplies: section.quick_replies ?? [],
                       contextTokens: section.context_tokens, tools: toolNames)
    }

    /// 1 to 64 ASCII letters, digits, - or _: what a provider or profile may be called.
    static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") })
    }

    /// Whether the URL's host is this machine: a server there usually takes no key.
    static func isLoopback(_ url: String) -> Bool {
        let scheme = url.hasPrefix("http://") ? 7 : url.hasPrefix("https://") ? 8 : 0
        guard scheme > 0 else { return false }
        var authority = url.dropFirst(scheme).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let host: Substring
        if authority.hasPrefix("[") {
            host = authority.dropFirst().prefix { $0 != "]" }
        } else {
            host = authority.prefix { $0 != ":" }
        }
        let lowered = host.lowercased()
        let octets = lowered.split(separator: ".", omittingEmptySubsequences: false)
        let isIPv4Loopback = octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
        return lowered == "localhost" || lowered.hasSuffix(".localhost") || lowered == "::1" || isIPv4Loopback
    }

    /// RFC 9110's token characters.
    static func isHeaderName(_ name: String) -> Bool {
        !name.isEmpty && name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar))
        }
    }

    /// Nothing that could end the header line or smuggle another one in.
    static func isHeaderValue(_ value: String) -> Bool {
        !value.unicodeScalars.contains { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }
    }

    /// `$CREDENTIALS_DIRECTORY/<name>`, trimmed; nil when there is no such credential (or it
    /// is empty). A credential that exists but cannot be read is an error, not a silent fallback.
    private static func credential(_ name: String, environment: [String: String]) throws(ConfigError) -> String? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else { return nil }
        let path = directory + "/" + name
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let key = try readText(path, "credential").trimmingWhitespace
        return key.isEmpty ? nil : key
    }

    /// The whole file as UTF-8, through plain reads so that /dev/null and pipes work too.
    static func readText(_ path: String, _ what: String) throws(ConfigError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try Files.readAll(path: path, limit: 1 << 20)
        } catch {
            throw ConfigError(description: "cannot read \(what) \(path): \(error)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(description: "\(what) \(path) is not UTF-8")
        }
        return text
    }
}

extension String {
    /// Without white space or line breaks at either end: a key file usually ends in a newline.
    var trimmingWhitespace: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
