import ConfabProtocol
import ServiceSettings
import Tools

/// A named starting point for conversations (`[profiles.NAME]`): which provider and model,
/// the system prompt, sampling parameters, and what the assistant says before anyone asks.
public struct Profile: Sendable, Equatable {
    public var name: String
    /// Always a configured provider's name: one left out in the file is the default provider.
    public var provider: String
    /// nil: the provider's model.
    public var model: String?
    public var system: String?
    public var params: SamplingParameters
    /// Assistant messages a new conversation starts with.
    public var welcome: [String]
    /// Offered under the last welcome message.
    public var quickReplies: [String]
    /// The context budget of its conversations, over the provider's.
    public var contextTokens: Int?
    /// The tools its conversations' replies may call, as its `tools` names them: HTTP tools
    /// (`[tools.NAME]`), MCP servers, single tools of a server (`SERVER.TOOL`).
    public var tools: [String]
    /// `tools`, each entry parsed.
    public var toolEntries: [QualifiedToolName] { tools.map(QualifiedToolName.init) }
    /// `vision`: whether its conversations' models take images, over the provider's; nil says
    /// nothing (the provider's holds).
    public var takesImages: Bool?
    /// `reasoning_format`, `thinking_budget`, `thinking`, `max_tokens_field` and `extra_body`,
    /// over its provider's.
    public var options = RequestOptions()
    /// Summaries (`conversation.compact`): the model that writes them (nil: the conversation's),
    /// the prompt that asks for them (nil: confab's own), and the share of `context_tokens` a
    /// reply's request may reach before a summary is made first (nil: never by itself).
    public var compaction = CompactionSettings()

    public init(name: String, provider: String, model: String? = nil, system: String? = nil,
                params: SamplingParameters = SamplingParameters(), welcome: [String] = [], quickReplies: [String] = [],
                contextTokens: Int? = nil, tools: [String] = []) {
        self.contextTokens = contextTokens
        self.tools = tools
        self.name = name
        self.provider = provider
        self.model = model
        self.system = system
        self.params = params
        self.welcome = welcome
        self.quickReplies = quickReplies
    }
}

/// Every configured profile, and the one a conversation that names none gets (if any).
public struct ProfileTable: Sendable, Equatable {
    public private(set) var profiles: [String: Profile]
    public let defaultName: String?

    /// `defaultName`, when given, must be one of `profiles`.
    public init(_ profiles: [Profile] = [], defaultName: String? = nil) {
        self.profiles = Dictionary(profiles.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        self.defaultName = defaultName
        if let defaultName { precondition(self.profiles[defaultName] != nil, "the default profile must be configured") }
    }

    public subscript(name: String) -> Profile? { profiles[name] }

    public var defaultProfile: Profile? { defaultName.flatMap { profiles[$0] } }

    /// Sorted by name, for listings.
    public var sorted: [Profile] { profiles.values.sorted { $0.name < $1.name } }
}

/// A profile's `compact_model`, `compact_prompt` and `compact_at`.
public struct CompactionSettings: Sendable, Equatable {
    public var model: String?
    public var prompt: String?
    /// A fraction of `context_tokens`, above 0 and below 1.
    public var at: Double?

    public init(model: String? = nil, prompt: String? = nil, at: Double? = nil) {
        self.model = model
        self.prompt = prompt
        self.at = at
    }
}
