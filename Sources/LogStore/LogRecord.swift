import ConfabProtocol

/// One line of a conversation log. Every record says what it is (`type`), which format
/// it is in (`v`) and when it was written (`at`), so a log reads on its own with `jq`.
public enum LogRecord: Equatable, Sendable {
    /// First line of every log.
    case header(ConversationHeader)
    /// A user message, stored complete.
    case message(Message)
    /// A reply began streaming (content empty).
    case replyStarted(Message)
    /// Text of a reply in flight, saved as it streams without fsync: after a crash it
    /// survives in the page cache, and the reply is restored as `interrupted` with it.
    case replyText(message: String, content: String)
    /// Reasoning of a reply in flight, saved as its text is (`reply.text`): the thought streamed
    /// since the last save, and when the thought began (the same in every such record).
    case replyReasoning(message: String, content: String, started: Timestamp)
    /// A reply ended: complete, cancelled, failed or interrupted, with its full text.
    case replyFinished(Message)
    case title(String)
    /// A newer message takes this one's place: a regenerated reply (`by` is the new reply,
    /// which may not have started yet: it is then owed), or an edited user message and the
    /// replies to it (`by` is the new user message, written in the same append).
    case superseded(message: String, by: String)
    /// The conversation's settings change for the replies that start after it (`conversation.configure`).
    case settings(ConversationSettings)
    /// The owner shares the conversation with another user, or changes that user's role.
    case shared(ConversationShare)
    /// The owner takes a user's share away.
    case unshared(uid: UInt32)
    /// A summary stands for a range of messages in what the model is sent from now on
    /// (`conversation.compact`); the messages stay. Replaces any compaction in force.
    case compaction(Compaction)
    /// The compaction in force ends: the model is sent the whole history again.
    case uncompaction

    public static let formatVersion = 1

    public func json(at time: Timestamp) -> JSON {
        var object: [String: JSON]
        switch self {
        case .header(let header):
            object = ["type": "conversation", "id": .string(header.id), "created": .string(header.created.description),
                      "title": .string(header.title), "model": .string(header.model)]
            if let system = header.system { object["system"] = .string(system) }
            if let provider = header.provider { object["provider"] = .string(provider) }
            if let profile = header.profile { object["profile"] = .string(profile) }
            if !header.params.isEmpty { object["params"] = header.params.json }
            if let forkedFrom = header.forkedFrom { object["forked_from"] = forkedFrom.json }
            if header.modelIsDefault { object["model_default"] = .bool(true) }
        case .message(let message): object = Self.messageRecord("message", message)
        case .replyStarted(let message): object = Self.messageRecord("reply.started", message)
        case .replyText(let id, let content): object = ["type": "reply.text", "message": .string(id), "content": .string(content)]
        case .replyReasoning(let id, let content, let started):
            object = ["type": "reply.reasoning", "message": .string(id), "content": .string(content), "started": .string(started.description)]
        case .replyFinished(let message): object = Self.messageRecord("reply.finished", message)
        case .title(let title): object = ["type": "title", "title": .string(title)]
        case .superseded(let id, let by): object = ["type": "superseded", "message": .string(id), "by": .string(by)]
        case .settings(let settings):
            object = ["type": "settings"]
            if let model = settings.model { object["model"] = .string(model) }
            if let system = settings.system { object["system"] = .string(system) }
            if let profile = settings.profile { object["profile"] = .string(profile) }
            if let params = settings.params { object["params"] = params.json }
            if settings.modelIsDefault == true { object["model_default"] = .bool(true) }
        case .shared(let share):
            object = ["type": "share", "uid": .int(Int(share.uid)), "login": .string(share.login), "role": .string(share.role.rawValue)]
        case .unshared(let uid): object = ["type": "unshare", "uid": .int(Int(uid))]
        case .compaction(let compaction): object = Self.compactionRecord(compaction)
        case .uncompaction: object = ["type": "uncompaction"]
        }
        object["v"] = .int(Self.formatVersion)
        object["at"] = .string(time.description)
        return .object(object)
    }

    /// A record holding a message: the message as clients see it, and beside it what the daemon
    /// alone keeps of it (`replay`: where its reasoning came from and the items to send back).
    private static func messageRecord(_ type: String, _ message: Message) -> [String: JSON] {
        var object: [String: JSON] = ["type": .string(type), "message": message.json]
        if let source = message.reasoningSource { object["replay"] = source.json }
        return object
    }

    /// The message of a record made by `messageRecord`.
    private static func message(of json: JSON) -> Message? {
        guard var message = json["message"].flatMap(Message.init(json:)) else { return nil }
        message.reasoningSource = json["replay"].flatMap(ReasoningSource.init(json:))
        return message
    }

    /// Nil when the record is not one this version understands.
    public init?(json: JSON) {
        guard let type = json["type"]?.string, let version = json["v"]?.int, version <= Self.formatVersion else { return nil }
        switch type {
        case "conversation":
            guard let id = json["id"]?.string, let created = json["created"]?.string.flatMap(Timestamp.init(rfc3339:)),
                  let title = json["title"]?.string, let model = json["model"]?.string else { return nil }
            self = .header(ConversationHeader(id: id, created: created, title: title, model: model, system: json["system"]?.string,
                                              forkedFrom: json["forked_from"].flatMap(ForkOrigin.init(json:)),
                                              provider: json["provider"]?.string, profile: json["profile"]?.string,
                                              params: json["params"].flatMap { try? SamplingParameters(json: $0) } ?? SamplingParameters(),
                                              modelIsDefault: json["model_default"]?.bool == true))
        case "message":
            guard let message = Self.message(of: json) else { return nil }
            self = .message(message)
        case "reply.started":
            guard let message = Self.message(of: json) else { return nil }
            self = .replyStarted(message)
        case "reply.text":
            guard let id = json["message"]?.string, let content = json["content"]?.string else { return nil }
            self = .replyText(message: id, content: content)
        case "reply.reasoning":
            guard let id = json["message"]?.string, let content = json["content"]?.string,
                  let started = json["started"]?.string.flatMap(Timestamp.init(rfc3339:)) else { return nil }
            self = .replyReasoning(message: id, content: content, started: started)
        case "reply.finished":
            guard let message = Self.message(of: json) else { return nil }
            self = .replyFinished(message)
        case "title":
            guard let title = json["title"]?.string else { return nil }
            self = .title(title)
        case "superseded":
            guard let id = json["message"]?.string, MessageID.order(of: id) != nil,
                  let by = json["by"]?.string, MessageID.order(of: by) != nil else { return nil }
            self = .superseded(message: id, by: by)
        case "settings":
            var settings = ConversationSettings()
            if let value = json["model"] {
                guard let model = value.string, !model.isEmpty else { return nil }
                settings.model = model
                if json["model_default"]?.bool == true { settings.modelIsDefault = true }
            }
            if let value = json["system"] {
                guard let system = value.string else { return nil }
                settings.system = system
            }
            if let value = json["profile"] {
                guard let profile = value.string else { return nil }
                settings.profile = profile
            }
            if let value = json["params"] {
                guard let params = try? SamplingParameters(json: value) else { return nil }
                settings.params = params
            }
            self = .settings(settings)
        case "share":
            guard let share = ConversationShare(json: json) else { return nil }
            self = .shared(share)
        case "unshare":
            guard let uid = json["uid"]?.int, let id = UInt32(exactly: uid) else { return nil }
            self = .unshared(uid: id)
        case "compaction", "uncompaction":
            guard let record = Self.compactionRecord(type: type, json) else { return nil }
            self = record
        default:
            return nil
        }
    }
}

public struct ConversationHeader: Equatable, Sendable {
    public var id: String
    public var created: Timestamp
    public var title: String
    public var model: String
    public var system: String?
    public var forkedFrom: ForkOrigin?
    /// The provider its replies come from; nil in logs from before providers, which means `default`.
    public var provider: String?
    /// The profile it was created from.
    public var profile: String?
    /// The sampling parameters its replies are asked for with (the profile's, with the creator's over them).
    public var params: SamplingParameters
    /// `model` is the default it was given because none was named (`"model_default": true`):
    /// it follows the configured default from then on, until a model is chosen. False in logs
    /// written before there was the flag: those keep the model they recorded.
    public var modelIsDefault: Bool

    public init(id: String, created: Timestamp, title: String, model: String, system: String?, forkedFrom: ForkOrigin? = nil,
                provider: String? = nil, profile: String? = nil, params: SamplingParameters = SamplingParameters(),
                modelIsDefault: Bool = false) {
        self.modelIsDefault = modelIsDefault
        self.profile = profile
        self.params = params
        self.id = id
        self.created = created
        self.title = title
        self.model = model
        self.system = system
        self.forkedFrom = forkedFrom
        self.provider = provider
    }
}

/// What a `settings` record changes; nil leaves a setting as it was.
public struct ConversationSettings: Equatable, Sendable {
    public var model: String?
    /// `""` clears the system prompt: the record needs a value that means "none" apart from "unchanged".
    public var system: String?
    public var profile: String?
    /// All the parameters from now on, not only those that changed.
    public var params: SamplingParameters?
    /// With `model`: it is the default, given because none was named (a profile without one):
    /// the conversation follows the configured default. Without: `model` was chosen.
    public var modelIsDefault: Bool?

    public init(model: String? = nil, system: String? = nil, profile: String? = nil, params: SamplingParameters? = nil,
                modelIsDefault: Bool? = nil) {
        self.modelIsDefault = modelIsDefault
        self.model = model
        self.system = system
        self.profile = profile
        self.params = params
    }

    public var isEmpty: Bool { model == nil && system == nil && profile == nil && params == nil }
}

extension ConversationHeader {
    /// The header as the conversation stands after `settings`: the list and the replies to come
    /// go by the latest settings, not those it was created with.
    public mutating func apply(_ settings: ConversationSettings) {
        if let model = settings.model {
            self.model = model
            modelIsDefault = settings.modelIsDefault == true
        }
        if let system = settings.system { self.system = system.isEmpty ? nil : system }
        if let profile = settings.profile { self.profile = profile }
        if let params = settings.params { self.params = params }
    }
}

/// A conversation as its log tells it.
public struct ReplayedConversation: Sendable {
    public var header: ConversationHeader
    public var title: String
    public var updated: Timestamp
    /// In id order.
    public var messages: [Message]
    /// Replies that started and never finished (the daemon died): now `interrupted`.
    public var interruptedReplies: [Message]
    /// Regenerated replies recorded (`superseded` … `by`) that never started: they are owed.
    public var owedReplies: [String] = []
    /// The summary in force: the last `compaction` record not ended by an `uncompaction`.
    public var compaction: Compaction? = nil
    /// The same records folded for the conversation list.
    public var summary: LogSummary
    /// The messages by where they are in the log, in id order, when it was read for them alone
    /// (`messages` is then empty): their texts stay in the log until needed.
    public var stored: [StoredMessage] = []
}

public enum Replay {
    /// A tool message's text when the daemon stopped or died during its call.
    public static let interruptedCall = "The call was interrupted: the daemon stopped before it ended."

    /// A reply cut off by a crash, whose request is not stored: its text, and for the prompt the
    /// system prompt and every message before it that was not replaced (a budget may have sent
    /// fewer; the estimate is rough either way).
    static func estimatedUsage(of reply: Message, in state: ReplayedConversation) -> Usage {
        let before = state.messages.filter { $0.order < reply.order && $0.supersededBy == nil }.map { message in
            (message.toolCalls ?? []).reduce(message.content) { $0 + $1.name + $1.arguments }
        }
        let system = state.header.system.map { [$0] } ?? []
        return Usage.estimate(prompt: system + before, completion: reply.content, reasoning: reply.reasoning?.text ?? "")
    }

    /// Folds records into a conversation. Records are applied in file order; messages end up in id order.
    public static func fold(_ records: [(record: LogRecord, at: Timestamp?)]) -> ReplayedConversation? {
        guard case .header(let header)? = records.first?.record else { return nil }
        var state = ReplayedConversation(header: header, title: header.title, updated: header.created, messages: [], interruptedReplies: [],
                                         summary: LogSummary(header: header))
        var index: [String: Int] = [:]
        var unfinished: Set<String> = []
        /// When each unfinished reply was last written to: its thought ended by then at the latest.
        var lastWritten: [String: Timestamp] = [:]
        var owed: Set<String> = []
        func upsert(_ message: Message) {
            owed.remove(message.id)
            if let position = index[message.id] {
                // A record rewriting a message (a reply's ending, a continuation's start) does
                // not carry what later records said of it.
                let supersededBy = state.messages[position].supersededBy
                state.messages[position] = message
                if state.messages[position].supersededBy == nil { state.messages[position].supersededBy = supersededBy }
            } else {
                index[message.id] = state.messages.count
                state.messages.append(message)
            }
        }
        for (record, at) in records.dropFirst() {
            state.summary.apply(record, at: at)
            if let at, at > state.updated { state.updated = at }
            switch record {
            case .header: continue
            case .message(let message): upsert(message)
            case .replyStarted(let message):
                upsert(message)
                unfinished.insert(message.id)
            case .replyText(let id, let content):
                if let position = index[id], unfinished.contains(id) {
                    state.messages[position].content += content
                    if let at { lastWritten[id] = at }
                }
            case .replyReasoning(let id, let content, let started):
                if let position = index[id], unfinished.contains(id) {
                    if state.messages[position].reasoning == nil {
                        state.messages[position].reasoning = Reasoning(text: "", started: started)
                    }
                    // Each record carries the clock's start as it stood (moved on by a pause).
                    state.messages[position].reasoning?.started = started
                    state.messages[position].reasoning?.text += content
                    if let at { lastWritten[id] = at }
                }
            case .replyFinished(let message):
                upsert(message)
                unfinished.remove(message.id)
            case .title(let title): state.title = title
            case .settings(let settings): state.header.apply(settings)
            case .shared, .unshared: continue  // folded by the summary: the list needs them without the messages
            case .compaction(var compaction):
                compaction.created = compaction.created ?? at
                state.compaction = compaction
            case .uncompaction: state.compaction = nil
            case .superseded(let id, let by):
                if let position = index[id] { state.messages[position].supersededBy = by }
                if index[by] == nil { owed.insert(by) }
            }
        }
        for id in unfinished {
            guard let position = index[id] else { continue }
            state.messages[position].status = .interrupted
            // What the model is given for the call in later requests: say what happened.
            if state.messages[position].role == .tool, state.messages[position].content.isEmpty {
                state.messages[position].content = Self.interruptedCall
            }
            // Its thinking is over: it ended when the reply was last written to, at the latest.
            if let reasoning = state.messages[position].reasoning, reasoning.ended == nil {
                state.messages[position].reasoning?.ended = max(reasoning.started, lastWritten[id] ?? reasoning.started)
            }
            // What streamed before the daemon died was paid for: estimated, as a stopped reply's is.
            if state.messages[position].role == .assistant, state.messages[position].usage == nil,
               !state.messages[position].content.isEmpty || !(state.messages[position].reasoning?.text.isEmpty ?? true) {
                state.messages[position].usage = Self.estimatedUsage(of: state.messages[position], in: state)
            }
            state.interruptedReplies.append(state.messages[position])
        }
        state.messages.sort { $0.order < $1.order }
        // A regenerated reply that never started is owed only while nothing came after it: once
        // a later reply exists, running it would answer out of order (as for a stored send).
        let lastReply = state.messages.filter { $0.role == .assistant }.map(\.sequence).max() ?? 0
        state.owedReplies = owed.compactMap(MessageID.sequence(of:)).filter { $0 > lastReply }.sorted().map(MessageID.make)
        state.interruptedReplies.sort { $0.order < $1.order }
        return state
    }
}
