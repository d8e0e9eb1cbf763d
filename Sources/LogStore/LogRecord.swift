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
    /// A reply ended: complete, cancelled, failed or interrupted, with its full text.
    case replyFinished(Message)
    case title(String)

    public static let formatVersion = 1

    public func json(at time: Timestamp) -> JSON {
        var object: [String: JSON]
        switch self {
        case .header(let header):
            object = ["type": "conversation", "id": .string(header.id), "created": .string(header.created.description),
                      "title": .string(header.title), "model": .string(header.model)]
            if let system = header.system { object["system"] = .string(system) }
        case .message(let message): object = ["type": "message", "message": message.json]
        case .replyStarted(let message): object = ["type": "reply.started", "message": message.json]
        case .replyText(let id, let content): object = ["type": "reply.text", "message": .string(id), "content": .string(content)]
        case .replyFinished(let message): object = ["type": "reply.finished", "message": message.json]
        case .title(let title): object = ["type": "title", "title": .string(title)]
        }
        object["v"] = .int(Self.formatVersion)
        object["at"] = .string(time.description)
        return .object(object)
    }

    /// Nil when the record is not one this version understands.
    public init?(json: JSON) {
        guard let type = json["type"]?.string, let version = json["v"]?.int, version <= Self.formatVersion else { return nil }
        switch type {
        case "conversation":
            guard let id = json["id"]?.string, let created = json["created"]?.string.flatMap(Timestamp.init(rfc3339:)),
                  let title = json["title"]?.string, let model = json["model"]?.string else { return nil }
            self = .header(ConversationHeader(id: id, created: created, title: title, model: model, system: json["system"]?.string))
        case "message":
            guard let message = json["message"].flatMap(Message.init(json:)) else { return nil }
            self = .message(message)
        case "reply.started":
            guard let message = json["message"].flatMap(Message.init(json:)) else { return nil }
            self = .replyStarted(message)
        case "reply.text":
            guard let id = json["message"]?.string, let content = json["content"]?.string else { return nil }
            self = .replyText(message: id, content: content)
        case "reply.finished":
            guard let message = json["message"].flatMap(Message.init(json:)) else { return nil }
            self = .replyFinished(message)
        case "title":
            guard let title = json["title"]?.string else { return nil }
            self = .title(title)
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

    public init(id: String, created: Timestamp, title: String, model: String, system: String?) {
        self.id = id
        self.created = created
        self.title = title
        self.model = model
        self.system = system
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
    /// The same records folded for the conversation list.
    public var summary: LogSummary
}

public enum Replay {
    /// Folds records into a conversation. Records are applied in file order; messages end up in id order.
    public static func fold(_ records: [(record: LogRecord, at: Timestamp?)]) -> ReplayedConversation? {
        guard case .header(let header)? = records.first?.record else { return nil }
        var state = ReplayedConversation(header: header, title: header.title, updated: header.created, messages: [], interruptedReplies: [],
                                         summary: LogSummary(header: header))
        var index: [String: Int] = [:]
        var unfinished: Set<String> = []
        func upsert(_ message: Message) {
            if let position = index[message.id] {
                state.messages[position] = message
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
                if let position = index[id], unfinished.contains(id) { state.messages[position].content += content }
            case .replyFinished(let message):
                upsert(message)
                unfinished.remove(message.id)
            case .title(let title): state.title = title
            }
        }
        for id in unfinished {
            guard let position = index[id] else { continue }
            state.messages[position].status = .interrupted
            state.interruptedReplies.append(state.messages[position])
        }
        state.messages.sort { $0.sequence < $1.sequence }
        state.interruptedReplies.sort { $0.sequence < $1.sequence }
        return state
    }
}
