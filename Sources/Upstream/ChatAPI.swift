import ConfabProtocol
import ServiceSettings

/// One HTTP request to the model server, as an API adapter builds it.
public struct UpstreamRequest: Sendable, Equatable {
    public var url: String
    public var headers: [String]
    public var body: [UInt8]
    public init(url: String, headers: [String], body: [UInt8]) {
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// With the provider's own headers: one named like a header already here (compared without
    /// case, as HTTP does) takes its place, so a config can override what the adapter sets.
    public func adding(_ extra: [HTTPHeader]) -> UpstreamRequest {
        guard !extra.isEmpty else { return self }
        let replaced = Set(extra.map { $0.name.lowercased() })
        var result = self
        result.headers = headers.filter { line in
            let name = line.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
            return !replaced.contains(name)
        } + extra.map { "\($0.name): \($0.value)" }
        return result
    }
}

/// What is particular to one wire format: where and how a reply is asked for, how its stream
/// reads and what its error bodies mean. `UpstreamClient` is the transport around it (libcurl on
/// the loop, timeouts, the stall timer, status and content-type checks, retries' raw material),
/// so a second format is one new adapter, not a second client.
public protocol ChatAPI: Sendable {
    /// Whether a request can be made at all with this configuration (e.g. a key it needs).
    func missingConfiguration(_ config: UpstreamConfig) -> MessageError?
    func request(for chat: ChatRequest, config: UpstreamConfig) -> UpstreamRequest
    /// A decoder for the stream answering `request` (a continuation may read differently).
    func makeDecoder(for request: ChatRequest) -> any ChatEventDecoder
    /// The failure a non-2xx answer stands for.
    func failure(status: Int, body: [UInt8]) -> MessageError
    /// `GET` asking which models the provider has (no body).
    func modelsRequest(config: UpstreamConfig) -> UpstreamRequest
    /// What the answer to `modelsRequest` says: its ids, or the reply error it stands for.
    func models(status: Int, body: [UInt8]) -> ModelListing
}

extension ChatAPI {
    public func models(status: Int, body: [UInt8]) -> ModelListing { modelListing(status: status, body: body) }
}

/// OpenAI-compatible chat completions: `POST {base_url}/chat/completions`, bearer key,
/// `choices[0].delta` chunks, `[DONE]`.
public struct OpenAIChatAPI: ChatAPI {
    public init() {}

    public func missingConfiguration(_ config: UpstreamConfig) -> MessageError? {
        guard config.requiresKey, (config.apiKey ?? "").isEmpty else { return nil }
        return MessageError(code: .notConfigured,
                            message: "no API key: set api_key in the config file or OPENAI_API_KEY in confabd's environment")
    }

    public func request(for chat: ChatRequest, config: UpstreamConfig) -> UpstreamRequest {
        var headers = ["Content-Type: application/json", "Accept: text/event-stream"]
        if let key = config.apiKey, !key.isEmpty { headers.append("Authorization: Bearer \(key)") }
        return UpstreamRequest(url: config.completionsURL, headers: headers, body: chat.jsonBody())
    }

    public func makeDecoder(for request: ChatRequest) -> any ChatEventDecoder { ChatStreamDecoder() }

    public func failure(status: Int, body: [UInt8]) -> MessageError { httpFailure(status: status, body: body) }

    public func modelsRequest(config: UpstreamConfig) -> UpstreamRequest {
        var headers = ["Accept: application/json"]
        if let key = config.apiKey, !key.isEmpty { headers.append("Authorization: Bearer \(key)") }
        return UpstreamRequest(url: config.url("models"), headers: headers, body: [])
    }
}

/// The reply error a non-2xx answer stands for, with the server's own message: the same
/// statuses mean the same things to every API confab speaks (Anthropic's 529, overloaded,
/// is a 5xx and so retried like one).
func httpFailure(status: Int, body: [UInt8]) -> MessageError {
    let info = upstreamErrorMessage(status: status, body: body)
    let code: ReplyErrorCode = switch status {
        case 401, 403: .upstreamAuth
        case 429: .rateLimited
        default: .upstreamHTTP
    }
    return MessageError(code: code, message: info.message, status: status)
}
