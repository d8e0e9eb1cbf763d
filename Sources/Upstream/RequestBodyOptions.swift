import ConfabProtocol
import ServiceSettings

// What Upstream's adapters make of the provider values (ServiceSettings): the adapter an API
// is spoken through, the body's extra members, and what a body leaves out.

extension ProviderAPI {
    /// The adapter that writes this API's requests and reads its streams.
    public var adapter: any ChatAPI {
        switch self {
        case .chat: OpenAIChatAPI()
        case .completions(let options): OpenAICompletionsAPI(options: options)
        case .anthropic(let options): AnthropicMessagesAPI(options: options)
        case .responses: OpenAIResponsesAPI()
        }
    }
}

extension RequestOptions {
    /// `,"key":value` for each `extra_body` member, before a body's closing brace.
    func writeExtraBody(into out: inout [UInt8]) {
        for member in extraBody {
            out.append(UInt8(ascii: ","))
            JSON.writeString(member.key, into: &out)
            out.append(UInt8(ascii: ":"))
            member.value.write(into: &out)
        }
    }
}

extension ProviderAPI {
    /// What a request body leaves out or changes of what was asked, for the daemon's log
    /// (Anthropic's refusals of sampling parameters with thinking).
    public func notices(for chat: ChatRequest) -> [String] {
        switch self {
        case .anthropic: AnthropicMessagesAPI.notices(for: chat)
        case .chat, .completions, .responses: []
        }
    }
}
