import ClientConfig
import ConfabProtocol
import DaemonSettings
import Posix
import ServiceSettings
import TOML
import Tools
import WebConfig
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
        var upload_idle_seconds: Int?
        var attachment_room_mib: Int?
    }
    /// One `[providers.NAME]` table, or `[upstream]` (the provider named `default`, with fewer
    /// keys: `isUpstream`), with the table itself for errors at its keys' lines.
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
        var prompt_cache: Bool?
        var context_tokens: Int?
        var vision: Bool?
        var reasoning_pass_back: String?
        var reasoning_effort: String?
        var reasoning: ReasoningKeys
        /// `[providers.NAME.prices.MODEL]`, in the order written.
        var prices: [PriceSection]? = nil
        /// `[upstream]`'s own: a provider's temperature is its profiles'.
        var temperature: Double? = nil
        /// `[upstream]`: its defaults are OpenAI's, and the environment fills what it leaves out.
        var isUpstream = false
    }
    /// One `[providers.NAME.prices.MODEL]` table: per million tokens.
    struct PriceSection {
        var model: String
        var table: ConfigTable
        var input: Double?
        var cached_input: Double?
        var cache_write: Double?
        var output: Double?
    }
    /// The keys of a provider or profile about reasoning and the request body.
    struct ReasoningKeys {
        var reasoning_format: String?
        var thinking_budget: Int?
        var thinking: Bool?
        var max_tokens_field: String?
        /// Converted when checked, for errors at nested lines.
        var extra_body: TOMLValue?
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
        var vision: Bool?
        var reasoning: ReasoningKeys
        var compact_model: String?
        var compact_prompt: String?
        var compact_at: Double?
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
    /// One `[mcp.NAME]` table, with the table itself for errors at its keys' lines.
    struct MCPSection {
        var name: String
        var table: ConfigTable
        var command: String?
        var args: [String]?
        var env: [(key: String, value: String)]?
        var cwd: String?
        var approval: String?
        var tools: [String]?
        var timeout_seconds: Int?
        var startup_timeout_seconds: Int?
        // A server over Streamable HTTP.
        var url: String?
        var headers: [(key: String, value: String)]?
        var header_env: [(key: String, value: String)]?
        var header_file: [(key: String, value: String)]?
        var bearer_token_env: String?
        var bearer_token_file: String?
        var start: String?
        var tool_approval: [(key: String, value: String)]?
    }
    var upstream: ProviderSection?
    var providers: [ProviderSection] = []
    var mcp: [MCPSection] = []
    var mcp_servers_file: String?
    var default_provider: String?
    var profiles: [ProfileSection] = []
    var default_profile: String?
    var tools: [ToolSection] = []
    var limits: LimitsSection?
    var fsync: Bool?
    var allow_uids: [Int]?
    /// `[web]`, the browser gateway's: read and checked by the one type both programs use.
    var web: WebSettings?
    /// The document itself, for errors at its top-level keys' lines.
    var root: ConfigTable?

    /// Unknown keys are errors: a typo should not silently leave a default in place.
    init(_ document: TOMLTable, file: String) throws(ConfigError) {
        var root = ConfigTable(file: file, table: document)
        upstream = try root.table("upstream", Self.upstreamSection)
        providers = try root.tables("providers", Self.providerSection) ?? []
        default_provider = try root.string("default_provider")
        profiles = try root.tables("profiles", Self.profileSection) ?? []
        default_profile = try root.string("default_profile")
        tools = try root.tables("tools", Self.toolSection) ?? []
        mcp = try root.tables("mcp", Self.mcpSection) ?? []
        mcp_servers_file = try root.string("mcp_servers_file")
        limits = try root.table("limits", Self.limitsSection)
        fsync = try root.table("storage") { (table: inout ConfigTable) throws(ConfigError) in try table.boolean("fsync") } ?? nil
        allow_uids = try root.table("access", Self.allowedUIDs) ?? nil
        web = try root.table("web") { (table: inout ConfigTable) throws(ConfigError) in
            table.readEveryKey()
            do throws(WebSettings.Problem) {
                return try WebSettings(web: table.table)
            } catch {
                // "config: web.listen (3:1): …" as the gateway says it, here with the file's name.
                let problem = error.description.hasPrefix("config: ") ? String(error.description.dropFirst(8)) : error.description
                throw ConfigError(description: "\(file): \(problem)")
            }
        }
        // `[client]`, confab's own: checked here (errors at start-up and on SIGHUP, as every
        // table's are), read by `confab attach`, used by nothing in the daemon.
        _ = try root.table("client") { (table: inout ConfigTable) throws(ConfigError) in
            table.readEveryKey()
            do throws(ClientSettings.Problem) {
                return try ClientSettings(client: table.table, file: file)
            } catch {
                throw ConfigError(description: error.description)
            }
        }
        try root.rejectUnknownKeys()
        self.root = root
    }

    init() {}

    /// `[upstream]`.
    private static func upstreamSection(_ table: inout ConfigTable) throws(ConfigError) -> ProviderSection {
        // Read by the provider reader as [providers.NAME] is (Settings.provider): the same
        // checks, messages and lines. Only these keys: the rest are unknown keys here.
        let base_url = try table.string("base_url"), model = try table.string("model")
        let api_key = try table.string("api_key"), api_key_file = try table.string("api_key_file")
        let timeout_seconds = try table.integer("timeout_seconds")
        let connect_timeout_seconds = try table.integer("connect_timeout_seconds")
        let temperature = try table.number("temperature"), max_tokens = try table.integer("max_tokens")
        let max_retries = try table.integer("max_retries"), context_tokens = try table.contextTokens()
        let vision = try table.boolean("vision"), prices = try table.prices()
        return ProviderSection(
            name: Provider.defaultName, table: table, base_url: base_url, api_key: api_key, api_key_file: api_key_file,
            timeout_seconds: timeout_seconds, connect_timeout_seconds: connect_timeout_seconds, max_retries: max_retries,
            model: model, max_tokens: max_tokens, context_tokens: context_tokens, vision: vision,
            reasoning: ReasoningKeys(), prices: prices, temperature: temperature, isUpstream: true)
    }

    /// `[providers.NAME]`.
    private static func providerSection(_ name: String, _ table: inout ConfigTable) throws(ConfigError) -> ProviderSection {
        return ProviderSection(
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
            prompt_cache: try table.boolean("prompt_cache"),
            context_tokens: try table.contextTokens(),
            vision: try table.boolean("vision"),
            reasoning_pass_back: try table.string("reasoning_pass_back"),
            reasoning_effort: try table.string("reasoning_effort"),
            reasoning: try table.reasoningKeys(),
            prices: try table.prices())
    }

    /// `[profiles.NAME]`.
    private static func profileSection(_ name: String, _ table: inout ConfigTable) throws(ConfigError) -> ProfileSection {
        return ProfileSection(
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
                seed: try table.integer("seed"),
                reasoningEffort: try table.string("reasoning_effort")),
            welcome: try table.strings("welcome"),
            quick_replies: try table.strings("quick_replies"),
            context_tokens: try table.contextTokens(),
            tools: try table.strings("tools"),
            vision: try table.boolean("vision"),
            reasoning: try table.reasoningKeys(),
            compact_model: try table.string("compact_model"),
            compact_prompt: try table.string("compact_prompt"),
            compact_at: try table.number("compact_at"))
    }

    /// `[tools.NAME]` and its `request`.
    private static func toolSection(_ name: String, _ table: inout ConfigTable) throws(ConfigError) -> ToolSection {
        return ToolSection(
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
    }

    /// `[mcp.NAME]`.
    private static func mcpSection(_ name: String, _ table: inout ConfigTable) throws(ConfigError) -> MCPSection {
        return MCPSection(
            name: name, table: table,
            command: try table.string("command"),
            args: try table.strings("args"),
            env: try table.stringTable("env"),
            cwd: try table.string("cwd"),
            approval: try table.string("approval"),
            tools: try table.strings("tools"),
            timeout_seconds: try table.integer("timeout_seconds"),
            startup_timeout_seconds: try table.integer("startup_timeout_seconds"),
            url: try table.string("url"),
            headers: try table.stringTable("headers"),
            header_env: try table.stringTable("header_env"),
            header_file: try table.stringTable("header_file"),
            bearer_token_env: try table.string("bearer_token_env"),
            bearer_token_file: try table.string("bearer_token_file"),
            start: try table.string("start"),
            tool_approval: try table.stringTable("tool_approval"))
    }

    /// `[limits]`.
    private static func limitsSection(_ table: inout ConfigTable) throws(ConfigError) -> LimitsSection {
        return LimitsSection(
            table: table,
            max_line_bytes: try table.integer("max_line_bytes"),
            max_client_buffer_bytes: try table.integer("max_client_buffer_bytes"),
            max_clients: try table.integer("max_clients"),
            max_queued_sends: try table.integer("max_queued_sends"),
            max_streams: try table.integer("max_streams"),
            unload_idle_seconds: try table.integer("unload_idle_seconds"),
            max_tool_rounds: try table.integer("max_tool_rounds"),
            tool_approval_timeout_seconds: try table.integer("tool_approval_timeout_seconds"),
            max_unanswered_requests: try table.integer("max_unanswered_requests"),
            upload_idle_seconds: try table.integer("upload_idle_seconds"),
            attachment_room_mib: try table.integer("attachment_room_mib"))
    }

    /// `[access] allow_uids`: uids, never the overflow uid.
    private static func allowedUIDs(_ table: inout ConfigTable) throws(ConfigError) -> [Int]? {
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
    }

    /// What kind of secret the file holds written out, for the warning a file others can read
    /// gets; nil when it holds none: an API key, an MCP server's credential-named `env`
    /// variable, or a credential-named header (of an MCP server or a tool).
    var writtenSecret: String? {
        if upstream?.api_key?.isEmpty == false || providers.contains(where: { $0.api_key?.isEmpty == false }) { return "an API key" }
        let named = { (pairs: [(key: String, value: String)]?) in
            (pairs ?? []).contains { ToolHeader.namesCredential($0.key) && !$0.value.isEmpty }
        }
        if let server = mcp.first(where: { named($0.env) }) { return "a credential in mcp.\(server.name).env" }
        if let server = mcp.first(where: { named($0.headers) }) { return "a credential header in mcp.\(server.name).headers" }
        if let tool = tools.first(where: { named($0.request?.headers) }) { return "a credential header in tools.\(tool.name).request.headers" }
        if providers.contains(where: { named($0.headers) }) { return "a credential header in a provider's headers" }
        return nil
    }
}

extension Settings {
    /// Reads `path` (a missing file is fine unless `required`) and the environment.
    public static func load(path: String, required: Bool, environment: [String: String]) throws(ConfigError) -> Settings {
        let info: FileStatus
        do {
            info = try Files.status(path: path)
        } catch {
            guard !required && error.code == ENOENT else {
                throw ConfigError(description: "cannot read \(path): \(error)")
            }
            return try resolve(ConfigFile(), environment: environment)
        }
        let file = try parse(readText(path, "config file"), path: path)
        var settings = try resolve(file, environment: environment)
        if info.permissions & 0o077 != 0, let secret = file.writtenSecret {
            settings.warnings.insert("\(path) holds \(secret) and can be read by others: chmod 600 \(path)", at: 0)
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
        // [upstream], or the environment alone when the file has none.
        let upstream = file.upstream ?? ConfigFile.ProviderSection(
            name: Provider.defaultName, table: ConfigTable(file: file.root?.file ?? "config", path: "upstream", table: TOMLTable()),
            reasoning: ConfigFile.ReasoningKeys(), isUpstream: true)
        settings.upstream = try provider(upstream, environment: environment, warnings: &settings.warnings).config

        func positive(_ value: Int?, _ name: String) throws(ConfigError) -> Int? {
            guard let value else { return nil }
            guard value > 0 else { throw file.limits?.table.error(name, "must be positive") ?? ConfigError(description: "limits.\(name) must be positive") }
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
                                        ("tool_approval_timeout_seconds", limits.tool_approval_timeout_seconds, 1...86400),
                                        ("upload_idle_seconds", limits.upload_idle_seconds, 1...86400),
                                        ("attachment_room_mib", limits.attachment_room_mib, BrokerLimits.attachmentRoomRange)] {
                if let value, !range.contains(value) {
                    throw limits.table.error(key, "must be between \(range.lowerBound) and \(range.upperBound)")
                }
            }
            if let rounds = limits.max_tool_rounds { settings.limits.maxToolRounds = rounds }
            if let seconds = limits.tool_approval_timeout_seconds { settings.limits.toolApprovalTimeoutSeconds = seconds }
            if let seconds = limits.upload_idle_seconds { settings.limits.uploadIdleSeconds = seconds }
            if let room = limits.attachment_room_mib { settings.limits.attachmentRoomMiB = room }
        }
        for section in file.providers {
            settings.providers.append(try provider(section, environment: environment, warnings: &settings.warnings))
        }
        for section in [upstream] + file.providers {
            for price in section.prices ?? [] {
                settings.prices.set(try modelPrice(price), provider: section.name, model: price.model)
            }
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
        for section in file.mcp {
            let draft = try section.draft(environment: environment, warnings: &settings.warnings)
            settings.mcpServers.append(try mcpServer(draft, tools: settings.tools, environment: environment))
        }
        if let path = file.mcp_servers_file {
            guard !path.isEmpty else { throw file.root?.error("mcp_servers_file", "must be a path") ?? ConfigError(description: "mcp_servers_file must be a path") }
            settings.mcpServers += try mcpServersFile(path, configPath: file.root?.file ?? "", tools: settings.tools, tables: settings.mcpServers,
                                                      environment: environment, warnings: &settings.warnings)
        }
        let table = settings.providerTable
        for section in file.profiles {
            settings.profiles.append(try profile(section, providers: table, tools: settings.tools, mcpServers: settings.mcpServers))
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
        settings.web = file.web ?? WebSettings()
        return settings
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
    static func credential(_ name: String, environment: [String: String]) throws(ConfigError) -> String? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else { return nil }
        let path = directory + "/" + name
        guard (try? Files.status(path: path)) != nil else { return nil }
        let key = try readText(path, "credential").trimmingWhitespace
        return key.isEmpty ? nil : key
    }

    /// A regular file its group or others may read: a secret in it is not kept secret.
    static func isReadableByOthers(_ path: String) -> Bool {
        guard let status = try? Files.status(path: path) else { return false }
        return status.kind == .regular && status.permissions & 0o044 != 0
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


extension ConfigTable {
    /// A provider's `prices`: one table per model, its keys numbers per million tokens.
    mutating func prices() throws(ConfigError) -> [ConfigFile.PriceSection]? {
        try tables("prices") { (model: String, table: inout ConfigTable) throws(ConfigError) in
            ConfigFile.PriceSection(model: model, table: table, input: try table.number("input"),
                                    cached_input: try table.number("cached_input"), cache_write: try table.number("cache_write"),
                                    output: try table.number("output"))
        }
    }

    mutating func reasoningKeys() throws(ConfigError) -> ConfigFile.ReasoningKeys {
        ConfigFile.ReasoningKeys(
            reasoning_format: try string("reasoning_format"),
            thinking_budget: try integer("thinking_budget"),
            thinking: try boolean("thinking"),
            max_tokens_field: try string("max_tokens_field"),
            extra_body: untyped("extra_body"))
    }
}
