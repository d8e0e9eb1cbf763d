import ConfabProtocol

/// One extra header a provider sends with every request (`headers` in its config table).
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// Which wire format a provider speaks, with what is particular to it.
public enum ProviderAPI: Sendable, Equatable {
    /// OpenAI-compatible chat completions.
    case chat
    /// The legacy `POST /completions`: a transcript prompt, labelled turns, stop sequences.
    case completions(CompletionsOptions)
    /// Anthropic's Messages API.
    case anthropic(AnthropicOptions)
    /// OpenAI's Responses API.
    case responses

    /// The name the config file uses (`api = "…"`).
    public var name: String {
        switch self {
        case .chat: "chat"
        case .completions: "completions"
        case .anthropic: "anthropic"
        case .responses: "responses"
        }
    }
}

/// Which turns' reasoning a chat-completions provider is sent back (`reasoning_pass_back`).
/// Servers disagree: DeepSeek's thinking mode refuses a request whose tool-call turns lack their
/// `reasoning_content` (every later request, until the next user message and after), its older
/// `deepseek-reasoner` refuses any `reasoning_content` at all, and other servers ignore the field.
public enum ReasoningPassBack: String, Sendable, Equatable, CaseIterable {
    /// `reasoning_content` on every assistant turn that called tools, made by the same provider
    /// and model; none on other turns. The default.
    case toolCalls = "tool_calls"
    /// Never any reasoning in a request.
    case none
}

public struct CompletionsOptions: Sendable, Equatable {
    public var userLabel: String
    public var assistantLabel: String
    public var stop: [String]

    public static let defaultUserLabel = "Human:"
    public static let defaultAssistantLabel = "AI:"

    public init(userLabel: String = Self.defaultUserLabel, assistantLabel: String = Self.defaultAssistantLabel, stop: [String]? = nil) {
        self.userLabel = userLabel
        self.assistantLabel = assistantLabel
        self.stop = stop ?? [userLabel, assistantLabel]
    }
}

public struct AnthropicOptions: Sendable, Equatable {
    /// The `anthropic-version` header.
    public var version: String

    public static let defaultVersion = "2023-06-01"
    /// The Messages API refuses a request without `max_tokens`: this one is sent when neither
    /// the provider nor the request sets it.
    public static let defaultMaxTokens = 1024

    /// Whether requests mark their stable prefix for the server's prompt cache
    /// (`cache_control` breakpoints: the tools, the system prompt, the newest turn and the one
    /// two before it), so that each turn of a long conversation reads what the last one wrote.
    /// The config's `prompt_cache` sets it, on unless switched off; a value made in code has it off.
    public var promptCache: Bool

    public init(version: String = Self.defaultVersion, promptCache: Bool = false) {
        self.version = version
        self.promptCache = promptCache
    }
}

/// Where one provider's replies come from and the limits of asking for them.
public struct UpstreamConfig: Sendable, Equatable {
    public var baseURL: String
    public var apiKey: String?
    /// The model of new conversations that name none; nil when the provider has no default.
    public var model: String?
    /// A stream with no byte for this long is abandoned.
    public var timeoutSeconds: Int
    public var connectTimeoutSeconds: Int
    public var temperature: Double?
    public var maxTokens: Int?
    /// Further attempts after a refusal that streamed nothing (429, 5xx, connection, timeout).
    public var maxRetries: Int
    /// Sent with every request, in this order; one named like a header the API sets replaces it.
    public var headers: [HTTPHeader]
    /// The context budget of conversations on this provider whose profile sets none.
    public var contextTokens: Int?
    /// Whether its models take images (`vision`); a profile may say otherwise for its own.
    public var takesImages = true
    /// Which turns' reasoning goes back to a chat-completions server (`reasoning_pass_back`).
    public var reasoningPassBack = ReasoningPassBack.toolCalls
    /// `reasoning_effort`: the default beneath a profile's and a conversation's.
    public var reasoningEffort: String?
    /// `reasoning_format`, `thinking_budget`, `thinking`, `max_tokens_field`, `extra_body`.
    public var options = RequestOptions()

    public init(baseURL: String = "https://api.openai.com/v1", apiKey: String? = nil, model: String? = "gpt-4o-mini",
                timeoutSeconds: Int = 60, connectTimeoutSeconds: Int = 10, temperature: Double? = nil, maxTokens: Int? = nil,
                maxRetries: Int = 2, headers: [HTTPHeader] = []) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.model = model
        self.timeoutSeconds = timeoutSeconds
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.temperature = temperature
        self.maxTokens = maxTokens
        self.maxRetries = maxRetries
        self.headers = headers
    }

    /// `{base_url}/PATH`, however many slashes the base URL ends with.
    public func url(_ path: String) -> String {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/" + path
    }

    public var completionsURL: String { url("chat/completions") }

    /// OpenAI's own API refuses every request without a key; local servers usually take none.
    public var requiresKey: Bool {
        let lowered = baseURL.lowercased()
        return lowered.contains("://api.openai.com")
    }
}

/// A model server as the config names it: where it is, how it is spoken to, and the limits of
/// talking to it. Conversations record a provider's name and look it up for every reply.
public struct Provider: Sendable, Equatable {
    /// `[upstream]` is the provider of this name.
    public static let defaultName = "default"

    public var name: String
    public var api: ProviderAPI
    public var config: UpstreamConfig

    public init(name: String, api: ProviderAPI = .chat, config: UpstreamConfig) {
        self.name = name
        self.api = api
        self.config = config
    }

    /// Whether images can be sent to its models at all: never to a completions server, whose
    /// API has no form for them; otherwise as its `vision` says.
    public var takesImages: Bool {
        if case .completions = api { return false }
        return config.takesImages
    }
}

/// Every configured provider, and the one a conversation that names none gets.
public struct ProviderTable: Sendable, Equatable {
    public private(set) var providers: [String: Provider]
    public let defaultName: String

    /// `defaultName` must be one of `providers`.
    public init(_ providers: [Provider], defaultName: String) {
        self.providers = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        precondition(self.providers[defaultName] != nil, "the default provider must be configured")
        self.defaultName = defaultName
    }

    public subscript(name: String) -> Provider? { providers[name] }

    public var defaultProvider: Provider { providers[defaultName]! }

    /// Names in order, for messages and logs.
    public var names: [String] { providers.keys.sorted() }
}

extension ProviderAPI {
    /// The sampling parameters this API has no field for: asking for one is refused, not dropped.
    public var unsupportedParameters: [SamplingParameters.Key] {
        switch self {
        case .chat: []
        case .completions: [.reasoning_effort]
        // Thinking is asked for with `thinking_budget`.
        case .anthropic: [.presence_penalty, .frequency_penalty, .seed, .reasoning_effort]
        // The Responses API has no penalties, stop sequences or seed.
        case .responses: [.presence_penalty, .frequency_penalty, .stop, .seed]
        }
    }
}
