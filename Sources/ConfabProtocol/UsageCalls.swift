/// `usage.summary`: tokens and what they cost, summed over replies, by one of these.
public enum UsageGrouping: String, CaseIterable, Sendable {
    case model
    case conversation
    /// The UTC day each reply was asked for (`2026-11-27`).
    case day
    /// Each reply on its own: only with `conversation`.
    case message
}

public struct UsageParams: RPCObject {
    /// Only replies asked for at or after this time.
    public var since: Timestamp?
    public var by = UsageGrouping.model
    /// Only this conversation's replies.
    public var conversation: String?
    public init() {}
    public init(since: Timestamp? = nil, by: UsageGrouping = .model, conversation: String? = nil) {
        self.since = since
        self.by = by
        self.conversation = conversation
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        var sinceText = since?.description
        try f.string("since", &sinceText)
        var byName: String? = by.rawValue
        try f.string("by", &byName)
        try f.string("conversation", &conversation)
        if f.isReading {
            if let sinceText {
                guard let time = Timestamp(rfc3339: sinceText) else { throw .invalidParams("parameter \"since\" is not a time") }
                since = time
            }
            if let byName {
                guard let grouping = UsageGrouping(rawValue: byName) else {
                    throw .invalidParams("parameter \"by\" must be " + UsageGrouping.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))
                }
                by = grouping
            }
            if by == .message, conversation == nil { throw .invalidParams("parameter \"by\": \"message\" needs \"conversation\"") }
        }
    }
}

/// Tokens and cost summed over some replies.
public struct UsageRow: RPCNestedObject {
    /// The model (`provider/model`), conversation id, day or message id the row sums.
    public var key = ""
    /// The conversation's title, for `by: conversation`.
    public var title: String?
    public var replies = 0
    public var promptTokens = 0
    public var completionTokens = 0
    public var reasoningTokens = 0
    public var cacheReadTokens = 0
    public var cacheWriteTokens = 0
    /// Replies whose usage confabd estimated (the server reported none).
    public var estimatedReplies = 0
    /// What the priced replies cost, per the config's prices; nil when none of them has a price.
    public var cost: Double?
    /// Replies of a model with no price in the config: not in `cost`.
    public var unpricedReplies = 0

    public init() {}
    public init(key: String) { self.key = key }

    /// Adds one reply's usage, and its cost when it has a price.
    public mutating func add(_ usage: Usage, cost replyCost: Double?) {
        replies += 1
        promptTokens += usage.promptTokens
        completionTokens += usage.completionTokens
        reasoningTokens += usage.reasoningTokens ?? 0
        cacheReadTokens += usage.cacheReadTokens ?? 0
        cacheWriteTokens += usage.cacheWriteTokens ?? 0
        if usage.isEstimated { estimatedReplies += 1 }
        if let replyCost { cost = (cost ?? 0) + replyCost } else { unpricedReplies += 1 }
    }

    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("key", &key)
        try f.string("title", &title)
        try f.int("replies", &replies, in: 0...Int.max)
        try f.int("prompt_tokens", &promptTokens, in: 0...Int.max)
        try f.int("completion_tokens", &completionTokens, in: 0...Int.max)
        try f.int("reasoning_tokens", &reasoningTokens, in: 0...Int.max)
        try f.int("cache_read_tokens", &cacheReadTokens, in: 0...Int.max)
        try f.int("cache_write_tokens", &cacheWriteTokens, in: 0...Int.max)
        try f.int("estimated_replies", &estimatedReplies, in: 0...Int.max)
        try f.double("cost", &cost)
        try f.int("unpriced_replies", &unpricedReplies, in: 0...Int.max)
    }
}

public struct UsageResult: RPCObject {
    /// By key: models and conversations by cost then tokens, most first; days and messages in order.
    public var rows: [UsageRow] = []
    public var total = UsageRow(key: "total")
    public init() {}
    public init(rows: [UsageRow], total: UsageRow) {
        self.rows = rows
        self.total = total
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.values("rows", &rows)
        try f.value("total", &total)
    }
}
