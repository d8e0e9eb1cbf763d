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

/// `message.send`'s (and `message.regenerate`'s, `message.continue`'s) answer: the reply's id.
public struct ReplyStarted: Equatable, Sendable {
    public var reply: String

    public init?(json: JSON) {
        guard let reply = json["reply"]?.string, MessageID.order(of: reply) != nil else { return nil }
        self.reply = reply
    }
}
