/// A summary standing in for the messages `first` … `last` in what the model is sent
/// (`conversation.compact`): stored as a `compaction` record, in force until an `uncompaction`
/// record (or a newer compaction). The messages it covers stay in the log and in the history.
public struct Compaction: Equatable, Sendable {
    /// The first and last message ids of the range it covers (the current messages from `first`
    /// through `last`; a tool call and its result are always on the same side of `last`).
    public var first: String
    public var last: String
    /// The model's text.
    public var summary: String
    /// The model and provider that wrote it.
    public var model: String
    public var provider: String?
    /// Tokens of the summary request, as the upstream reported them (or estimated).
    public var usage: Usage?
    /// The focus hint it was asked with.
    public var focus: String?
    /// Run by the daemon before a reply whose context would pass `compact_at`.
    public var automatic: Bool
    /// When it was stored (the record's `at`).
    public var created: Timestamp?

    public init(first: String, last: String, summary: String, model: String, provider: String? = nil, usage: Usage? = nil,
                focus: String? = nil, automatic: Bool = false, created: Timestamp? = nil) {
        self.first = first
        self.last = last
        self.summary = summary
        self.model = model
        self.provider = provider
        self.usage = usage
        self.focus = focus
        self.automatic = automatic
        self.created = created
    }

    /// How long the summary is in tokens: what the upstream reported for its text, else an
    /// estimate (4 bytes a token).
    public var tokens: Int {
        if let usage, !usage.isEstimated, usage.completionTokens > 0 { return usage.completionTokens }
        return (summary.utf8.count + 3) / 4
    }

    /// Whether `id` is one of the messages it covers (by order: superseded ones in between too).
    public func covers(_ id: String) -> Bool {
        guard let order = MessageID.order(of: id), let lastOrder = MessageID.order(of: last) else { return false }
        return order <= lastOrder
    }

    /// The fields both the log record and the wire carry.
    public var fieldsJSON: [String: JSON] {
        var object: [String: JSON] = ["first": .string(first), "last": .string(last), "summary": .string(summary),
                                      "model": .string(model), "tokens": .int(tokens)]
        if let provider { object["provider"] = .string(provider) }
        if let usage { object["usage"] = usage.json }
        if let focus { object["focus"] = .string(focus) }
        if automatic { object["automatic"] = .bool(true) }
        if let created { object["created"] = .string(created.description) }
        return object
    }

    public var json: JSON { .object(fieldsJSON) }

    public init?(json: JSON) {
        guard let first = json["first"]?.string, MessageID.order(of: first) != nil,
              let last = json["last"]?.string, MessageID.order(of: last) != nil,
              let summary = json["summary"]?.string, let model = json["model"]?.string else { return nil }
        self.init(first: first, last: last, summary: summary, model: model, provider: json["provider"]?.string,
                  usage: json["usage"].flatMap(Usage.init(json:)), focus: json["focus"]?.string,
                  automatic: json["automatic"]?.bool ?? false,
                  created: json["created"]?.string.flatMap(Timestamp.init(rfc3339:)))
    }

    /// The line a screen shows where the summary stands:
    /// `── m1…m40 summarised (1,234 tokens): /summary to read, /uncompact to undo ──`.
    public var line: String {
        "── \(first)…\(last) summarised (\(Self.grouped(tokens)) tokens): /summary to read, /uncompact to undo ──"
    }

    /// 1234 as `1,234`.
    public static func grouped(_ number: Int) -> String {
        let digits = Array(String(abs(number)))
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (number < 0 ? "-" : "") + out
    }
}

extension Compaction: RPCFieldFromJSON { public static var fieldShape: String { "a compaction" } }

/// `conversation.compact`: summarise the conversation so far for the model.
public struct CompactParams: RPCObject {
    public var conversation = ""
    /// What the summary should keep above all (a hint added to the summary prompt).
    public var focus: String?
    public init() {}
    public init(conversation: String, focus: String? = nil) {
        self.conversation = conversation
        self.focus = focus
    }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) {
        try f.string("conversation", &conversation)
        try f.string("focus", &focus)
    }
}

/// `conversation.compact`'s answer, once the summary is stored: the compaction now in force.
public struct CompactResult: RPCObject {
    public var compaction: Compaction?
    public init() {}
    public init(compaction: Compaction) { self.compaction = compaction }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.value("compaction", &compaction) }
}

/// `conversation.uncompact`'s answer: the compaction it ended.
public struct UncompactResult: RPCObject {
    public var uncompacted: Compaction?
    public init() {}
    public init(uncompacted: Compaction) { self.uncompacted = uncompacted }
    public mutating func fields(_ f: inout RPCFields) throws(RPCError) { try f.value("uncompacted", &uncompacted) }
}

public enum CompactCall: RPCCall { public typealias Params = CompactParams; public typealias Result = CompactResult; public static let method = RPCMethod.conversationCompact }
public enum UncompactCall: RPCCall { public typealias Params = ConversationTarget; public typealias Result = UncompactResult; public static let method = RPCMethod.conversationUncompact }
