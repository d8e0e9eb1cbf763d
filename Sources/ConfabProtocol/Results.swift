// The results of the methods a reply's followers call, as typed values: what the daemon
// answers and the client reads, field names spelled once.

/// Why the model stopped a turn, when the upstream said (`finish_reason`).
public enum FinishReason: String, CaseIterable, Sendable {
    case stop
    /// The model reached its token limit: `message.continue` can go on with it.
    case length
    case toolCalls = "tool_calls"
    case contentFilter = "content_filter"
}

extension Message {
    /// A reply the model's token limit cut off (it can be continued).
    public var isCutAtLengthLimit: Bool { finishReason == FinishReason.length.rawValue }

    /// A turn that ended asking for tools, so its reply goes on after them. A turn that failed
    /// (too many rounds of tools) keeps its calls for the record, and ends its reply.
    public var continuesAfterTools: Bool { role == .assistant && !(toolCalls ?? []).isEmpty && status == .complete }
}

/// `hello`'s answer.
public struct HelloResult: Equatable, Sendable {
    public var clientID: String
    /// Our name as others see it.
    public var name: String?

    public init(clientID: String, name: String?) {
        self.clientID = clientID
        self.name = name
    }

    public init(json: JSON) {
        self.init(clientID: json["client_id"]?.string ?? "", name: json["user"]?["name"]?.string)
    }
}

/// `conversation.attach`'s answer.
public struct AttachResult: Equatable, Sendable {
    public var conversation: ConversationInfo?
    /// The last messages asked for, oldest first, the reply in flight excluded.
    public var messages: [Message]
    /// The reply in flight (status `streaming`, its text so far), unless its tool calls run.
    public var pending: Message?
    /// The tool messages of the reply in flight whose calls have not ended.
    public var tools: [Message]
    /// The other clients attached.
    public var clients: [ClientInfo]

    public init(json: JSON) {
        conversation = json["conversation"].flatMap(ConversationInfo.init(json:))
        messages = (json["messages"]?.array ?? []).compactMap(Message.init(json:))
        pending = json["pending"].flatMap(Message.init(json:))
        tools = (json["tools"]?.array ?? []).compactMap(Message.init(json:))
        clients = (json["clients"]?.array ?? []).compactMap(ClientInfo.init(json:))
    }
}

/// `message.send`'s (and `message.regenerate`'s, `message.continue`'s) answer: the reply's id.
public struct ReplyStarted: Equatable, Sendable {
    public var reply: String

    public init?(json: JSON) {
        guard let reply = json["reply"]?.string, MessageID.order(of: reply) != nil else { return nil }
        self.reply = reply
    }
}

/// `generation.cancel`'s answer: the reply stopped, or nil when nothing was streaming.
public struct CancelResult: Equatable, Sendable {
    public var cancelled: String?

    public init(json: JSON) { cancelled = json["cancelled"]?.string }
}
