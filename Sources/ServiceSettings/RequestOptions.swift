import ConfabProtocol

/// How a chat-completions server takes `reasoning_effort` (`reasoning_format`).
public enum ReasoningFormat: String, Sendable, Equatable, CaseIterable {
    /// `"reasoning_effort": "high"` (OpenAI, DeepSeek, vLLM, llama.cpp, Ollama).
    case openai
    /// OpenRouter's `"reasoning": {"effort": "high"}`.
    case openrouter
}

/// Which field of a chat-completions body carries the reply's token limit (`max_tokens_field`):
/// OpenAI's reasoning models refuse `max_tokens` and take `max_completion_tokens`.
public enum MaxTokensField: String, Sendable, Equatable, CaseIterable {
    case max_tokens
    case max_completion_tokens
}

/// One member of `extra_body`: a key confab does not set, merged as it is into every request body.
public struct ExtraBodyMember: Sendable, Equatable {
    public var key: String
    public var value: JSON

    public init(key: String, value: JSON) {
        self.key = key
        self.value = value
    }
}

/// What a provider or profile sets about a request beyond the sampling parameters: how
/// reasoning is asked for or switched off, the token field's name, and the body's extra members.
/// A profile's are over its provider's (`overridden(by:)`).
public struct RequestOptions: Sendable, Equatable {
    public var reasoningFormat: ReasoningFormat?
    /// Anthropic's `thinking: {type: "enabled", budget_tokens: N}`.
    public var thinkingBudget: Int?
    /// `thinking = false` switches thinking off where the API has a switch; `true` on.
    public var thinking: Bool?
    public var maxTokensField: MaxTokensField?
    /// In the order written; a key given again (a profile's over its provider's) takes the first's place.
    public var extraBody: [ExtraBodyMember]

    /// Anthropic refuses a smaller budget.
    public static let minimumThinkingBudget = 1024

    public init(reasoningFormat: ReasoningFormat? = nil, thinkingBudget: Int? = nil, thinking: Bool? = nil,
                maxTokensField: MaxTokensField? = nil, extraBody: [ExtraBodyMember] = []) {
        self.reasoningFormat = reasoningFormat
        self.thinkingBudget = thinkingBudget
        self.thinking = thinking
        self.maxTokensField = maxTokensField
        self.extraBody = extraBody
    }

    public var isEmpty: Bool { self == RequestOptions() }

    /// These with what `other` sets in their place: `extra_body` member by member.
    public func overridden(by other: RequestOptions) -> RequestOptions {
        var extra = extraBody
        for member in other.extraBody {
            if let index = extra.firstIndex(where: { $0.key == member.key }) { extra[index] = member } else { extra.append(member) }
        }
        // A profile that switches thinking off drops its provider's budget, and one that sets a
        // budget turns thinking on.
        let budget: Int? = other.thinking == false ? other.thinkingBudget : (other.thinkingBudget ?? thinkingBudget)
        let thinking: Bool? = other.thinkingBudget != nil ? (other.thinking ?? true) : (other.thinking ?? self.thinking)
        return RequestOptions(reasoningFormat: other.reasoningFormat ?? reasoningFormat, thinkingBudget: budget,
                              thinking: thinking, maxTokensField: other.maxTokensField ?? maxTokensField, extraBody: extra)
    }

    /// The string values of `extra_body` under a credential's name (`api_key`, `X-Auth-Token`,
    /// any depth): secrets, redacted wherever the daemon writes what comes from outside.
    public var secretValues: [String] {
        func collect(_ value: JSON, named name: String?, into out: inout [String]) {
            switch value {
            case .string(let text):
                if let name, Self.namesCredential(name), !text.isEmpty { out.append(text) }
            case .array(let items):
                for item in items { collect(item, named: name, into: &out) }
            case .object(let members):
                for (key, item) in members { collect(item, named: key, into: &out) }
            default:
                break
            }
        }
        var out: [String] = []
        for member in extraBody { collect(member.value, named: member.key, into: &out) }
        return out
    }

    /// As a header's name is judged (`ToolHeader.namesCredential`).
    static func namesCredential(_ name: String) -> Bool {
        let lower = name.lowercased()
        return ["authorization", "cookie"].contains(lower)
            || ["key", "token", "secret", "password", "auth"].contains { lower.contains($0) }
    }
}

extension ProviderAPI {
    /// The top-level keys of a request body this API's adapter writes itself: `extra_body`
    /// may not hold them (each has its own setting, or is confab's to decide).
    public var ownBodyKeys: [String] {
        switch self {
        case .chat:
            ["model", "messages", "stream", "stream_options", "tools", "temperature", "top_p", "max_tokens", "max_completion_tokens",
             "presence_penalty", "frequency_penalty", "stop", "seed", "reasoning_effort", "reasoning", "thinking"]
        case .completions:
            ["model", "prompt", "stream", "stream_options", "temperature", "top_p", "max_tokens", "presence_penalty",
             "frequency_penalty", "stop", "seed"]
        case .anthropic:
            ["model", "max_tokens", "system", "messages", "stream", "tools", "temperature", "top_p", "stop_sequences", "thinking"]
        case .responses:
            ["model", "input", "instructions", "stream", "store", "include", "tools", "max_output_tokens", "temperature", "top_p", "reasoning"]
        }
    }

    /// The setting that writes a key of `ownBodyKeys`, for the error that refuses it in `extra_body`.
    public static func setting(writing key: String) -> String? {
        switch key {
        case "temperature", "top_p", "presence_penalty", "frequency_penalty", "stop", "seed", "reasoning_effort", "max_tokens": key
        case "max_completion_tokens": "max_tokens with max_tokens_field = \"max_completion_tokens\""
        case "max_output_tokens": "max_tokens"
        case "stop_sequences": "stop"
        case "thinking": "thinking_budget or thinking"
        case "reasoning": "reasoning_effort"
        default: nil
        }
    }
}
