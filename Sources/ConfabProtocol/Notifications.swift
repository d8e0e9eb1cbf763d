// The notifications of docs/protocol.md as typed values: the daemon encodes them and the
// client decodes them with this one file, so a renamed field or notification is a compile
// error (or a failing round-trip test) on both ends at once.

/// Something that happened in one conversation, told to every client attached to it.
public enum ConversationEvent: Equatable, Sendable {
    /// A user message was stored, or a reply (or a turn of one after its tool calls) started.
    case messageCreated(Message)
    /// A piece of a reply's text: append it.
    case messageDelta(message: String, content: String)
    /// A piece of a reply's reasoning: append it to `message.reasoning.text` (the first one
    /// starts the reasoning; the first `message.delta` or tool call after it ends it).
    case messageReasoning(message: String, content: String)
    /// A reply (or one of its turns, or a tool message) ended `complete`, `cancelled` or `interrupted`.
    case messageCompleted(Message)
    /// The upstream refused before any text; it is asked again after `delayMilliseconds`.
    case messageRetrying(message: String, attempt: Int, delayMilliseconds: Int, error: MessageError?)
    /// A reply failed; `error` is the same as `message.error`.
    case messageFailed(Message, error: MessageError?)
    /// `message` has `superseded_by` `by` now.
    case messageSuperseded(message: String, by: String)
    /// A stored reply goes on (`message.continue`): its text so far, deltas follow.
    case messageContinued(Message)
    /// `by` stopped the reply; its `message.completed` follows.
    case generationCancelled(message: String, by: ClientInfo?)
    /// A call waits for a yes: its tool message (when sent) and the call.
    case toolApprovalRequested(message: Message?, call: ToolCall)
    /// `by` allowed the call first.
    case toolApproved(call: String, by: ClientInfo?)
    /// `by` refused the call first, or nobody answered in time (`by` nil).
    case toolDenied(call: String, by: ClientInfo?)
    /// A call begins: its tool message (status `streaming`) and the call it answers.
    case toolStarted(message: Message, call: ToolCall)
    /// A call ended, whatever its status: the stored tool message.
    case toolCompleted(Message)
    /// Renamed or configured; `by` is who changed its settings (`conversation.configure`), when known.
    case conversationUpdated(ConversationInfo, by: ClientInfo? = nil)
    /// Deleted; the client is detached.
    case conversationDeleted
    case clientAttached(ClientInfo)
    case clientDetached(ClientInfo)
    /// The owner stopped sharing the conversation with this client's user; it is detached.
    case conversationUnshared(by: ClientInfo?)
    /// A call in flight reported how far it is; its `tool.completed` follows.
    case toolProgress(ToolProgress)
    /// A summary is being written; `by` asked for it (nil: the daemon, before a reply).
    case compactionStarted(by: ClientInfo?, automatic: Bool)
    /// A piece of the summary's text (the model's: shown through the terminal-safe path).
    case compactionDelta(content: String)
    /// The summary is stored and in force from now on.
    case compactionCompleted(Compaction)
    /// The summary failed (`error`) or was cancelled (`cancelledBy`): nothing was stored.
    case compactionFailed(error: MessageError?, cancelledBy: ClientInfo?)
    /// The summary in force ended: `by` undid it, or (nil) an edit inside its range did.
    case compactionUndone(Compaction, by: ClientInfo?)

    public var kind: RPCNotification {
        switch self {
        case .messageCreated: .messageCreated
        case .messageDelta: .messageDelta
        case .messageReasoning: .messageReasoning
        case .messageCompleted: .messageCompleted
        case .messageRetrying: .messageRetrying
        case .messageFailed: .messageFailed
        case .messageSuperseded: .messageSuperseded
        case .messageContinued: .messageContinued
        case .generationCancelled: .generationCancelled
        case .toolApprovalRequested: .toolApprovalRequested
        case .toolApproved: .toolApproved
        case .toolDenied: .toolDenied
        case .toolStarted: .toolStarted
        case .toolCompleted: .toolCompleted
        case .conversationUpdated: .conversationUpdated
        case .conversationDeleted: .conversationDeleted
        case .clientAttached: .clientAttached
        case .clientDetached: .clientDetached
        case .conversationUnshared: .conversationUnshared
        case .toolProgress: .toolProgress
        case .compactionStarted: .compactionStarted
        case .compactionDelta: .compactionDelta
        case .compactionCompleted: .compactionCompleted
        case .compactionFailed: .compactionFailed
        case .compactionUndone: .compactionUndone
        }
    }

    /// The params, less `conversation` (which the conversation adds when it broadcasts).
    public var params: [String: JSON] {
        switch self {
        case .messageCreated(let message), .messageCompleted(let message), .messageContinued(let message),
             .toolCompleted(let message):
            return ["message": message.json]
        case .messageDelta(let message, let content), .messageReasoning(let message, let content):
            return ["message": .string(message), "content": .string(content)]
        case .messageRetrying(let message, let attempt, let delay, let error):
            return ["message": .string(message), "attempt": .int(attempt), "delay_ms": .int(delay), "error": error?.json ?? .null]
        case .messageFailed(let message, let error):
            return ["message": message.json, "error": error?.json ?? .null]
        case .messageSuperseded(let message, let by):
            return ["message": .string(message), "by": .string(by)]
        case .generationCancelled(let message, let by):
            return ["message": .string(message), "by": by?.json ?? .null]
        case .toolApprovalRequested(let message, let call):
            var params: [String: JSON] = ["message": message?.json ?? .null, "call": .string(call.id), "tool": .string(call.name),
                                          "arguments": .string(call.arguments)]
            if let requester = message?.tool?.requestedBy { params["requested_by"] = requester.json }
            return params
        case .toolApproved(let call, let by), .toolDenied(let call, let by):
            return ["call": .string(call), "client": by?.json ?? .null]
        case .toolStarted(let message, let call):
            return ["message": message.json, "call": call.json]
        case .conversationUpdated(let info, let by):
            var params: [String: JSON] = ["info": info.json]
            if let by { params["by"] = by.json }
            return params
        case .conversationDeleted:
            return [:]
        case .clientAttached(let client), .clientDetached(let client):
            return ["client": client.json]
        case .conversationUnshared(let by):
            return ["by": by?.json ?? .null]
        case .toolProgress(let progress):
            return progress.params
        case .compactionStarted(let by, let automatic):
            return ["by": by?.json ?? .null, "automatic": .bool(automatic)]
        case .compactionDelta(let content):
            return ["content": .string(content)]
        case .compactionCompleted(let compaction):
            return ["compaction": compaction.json]
        case .compactionFailed(let error, let by):
            return ["error": error?.json ?? .null, "cancelled": .bool(error == nil), "by": by?.json ?? .null]
        case .compactionUndone(let compaction, let by):
            return ["compaction": compaction.json, "by": by?.json ?? .null]
        }
    }

    /// Reads `params` of a notification of `kind`; nil when a field it needs is missing or
    /// of the wrong type (such a frame is dropped, as an unknown notification is).
    public init?(kind: RPCNotification, params: JSON) {
        func message(_ key: String = "message") -> Message? { params[key].flatMap(Message.init(json:)) }
        func client(_ key: String) -> ClientInfo? { params[key].flatMap(ClientInfo.init(json:)) }
        func error() -> MessageError? { params["error"].flatMap(MessageError.init(json:)) }
        switch kind {
        case .messageCreated:
            guard let message = message() else { return nil }
            self = .messageCreated(message)
        case .messageDelta:
            guard let id = params["message"]?.string, let content = params["content"]?.string else { return nil }
            self = .messageDelta(message: id, content: content)
        case .messageReasoning:
            guard let id = params["message"]?.string, let content = params["content"]?.string else { return nil }
            self = .messageReasoning(message: id, content: content)
        case .messageCompleted:
            guard let message = message() else { return nil }
            self = .messageCompleted(message)
        case .messageRetrying:
            guard let id = params["message"]?.string else { return nil }
            self = .messageRetrying(message: id, attempt: params["attempt"]?.int ?? 1,
                                    delayMilliseconds: max(0, params["delay_ms"]?.int ?? 0), error: error())
        case .messageFailed:
            guard let message = message() else { return nil }
            self = .messageFailed(message, error: error() ?? message.error)
        case .messageSuperseded:
            guard let id = params["message"]?.string, let by = params["by"]?.string else { return nil }
            self = .messageSuperseded(message: id, by: by)
        case .messageContinued:
            guard let message = message() else { return nil }
            self = .messageContinued(message)
        case .generationCancelled:
            guard let id = params["message"]?.string else { return nil }
            self = .generationCancelled(message: id, by: client("by"))
        case .toolApprovalRequested:
            guard let id = params["call"]?.string else { return nil }
            self = .toolApprovalRequested(message: message(),
                                          call: ToolCall(id: id, name: params["tool"]?.string ?? "?",
                                                         arguments: params["arguments"]?.string ?? ""))
        case .toolApproved, .toolDenied:
            guard let id = params["call"]?.string else { return nil }
            self = kind == .toolApproved ? .toolApproved(call: id, by: client("client")) : .toolDenied(call: id, by: client("client"))
        case .toolStarted:
            guard let message = message(), let call = params["call"].flatMap(ToolCall.init(json:)) else { return nil }
            self = .toolStarted(message: message, call: call)
        case .toolCompleted:
            guard let message = message() else { return nil }
            self = .toolCompleted(message)
        case .conversationUpdated:
            guard let info = params["info"].flatMap(ConversationInfo.init(json:)) else { return nil }
            self = .conversationUpdated(info, by: client("by"))
        case .conversationDeleted:
            self = .conversationDeleted
        case .clientAttached, .clientDetached:
            guard let client = client("client") else { return nil }
            self = kind == .clientAttached ? .clientAttached(client) : .clientDetached(client)
        case .conversationUnshared:
            self = .conversationUnshared(by: client("by"))
        case .toolProgress:
            guard let progress = ToolProgress(params: params) else { return nil }
            self = .toolProgress(progress)
        case .compactionStarted:
            self = .compactionStarted(by: client("by"), automatic: params["automatic"]?.bool ?? false)
        case .compactionDelta:
            guard let content = params["content"]?.string else { return nil }
            self = .compactionDelta(content: content)
        case .compactionCompleted:
            guard let compaction = params["compaction"].flatMap(Compaction.init(json:)) else { return nil }
            self = .compactionCompleted(compaction)
        case .compactionFailed:
            self = .compactionFailed(error: error(), cancelledBy: client("by"))
        case .compactionUndone:
            guard let compaction = params["compaction"].flatMap(Compaction.init(json:)) else { return nil }
            self = .compactionUndone(compaction, by: client("by"))
        case .serverStopping:
            return nil
        }
    }

    /// The message id the event is about, when it is about one.
    public var messageID: String? {
        switch self {
        case .messageCreated(let message), .messageCompleted(let message), .messageContinued(let message),
             .toolCompleted(let message), .messageFailed(let message, _), .toolStarted(let message, _):
            return message.id
        case .messageDelta(let id, _), .messageReasoning(let id, _), .messageRetrying(let id, _, _, _), .messageSuperseded(let id, _),
             .generationCancelled(let id, _):
            return id
        case .toolApprovalRequested(let message, _):
            return message?.id
        case .toolProgress(let progress):
            return progress.message
        case .toolApproved, .toolDenied, .conversationUpdated, .conversationDeleted, .clientAttached, .clientDetached,
             .conversationUnshared, .compactionStarted, .compactionDelta, .compactionCompleted, .compactionFailed, .compactionUndone:
            return nil
        }
    }
}

/// Every notification the daemon sends, decoded.
public enum ServerNotification: Equatable, Sendable {
    case conversation(String, ConversationEvent)
    /// The daemon is shutting down.
    case serverStopping(reason: String?)

    public var kind: RPCNotification {
        switch self {
        case .conversation(_, let event): event.kind
        case .serverStopping: .serverStopping
        }
    }

    public var params: JSON {
        switch self {
        case .conversation(let id, let event):
            var params = event.params
            params["conversation"] = .string(id)
            return .object(params)
        case .serverStopping(let reason):
            return reason.map { ["reason": .string($0)] } ?? [:]
        }
    }

    /// The frame, as the daemon writes it.
    public var frame: [UInt8] { RPC.notification(kind, params: params) }

    /// nil for a method this version does not know, or params it cannot read.
    public init?(method: String, params: JSON?) {
        guard let kind = RPCNotification(rawValue: method) else { return nil }
        let params = params ?? [:]
        if kind == .serverStopping {
            self = .serverStopping(reason: params["reason"]?.string)
            return
        }
        guard let conversation = params["conversation"]?.string,
              let event = ConversationEvent(kind: kind, params: params) else { return nil }
        self = .conversation(conversation, event)
    }
}

/// `tool.progress`: how far a call in flight is, as its tool reported it. `message` is the
/// call's tool message (as `tool.started` names it), `call` the call's id, `tool` its name
/// as the model called it; `text` is the tool's own words, untrusted (shown escaped).
public struct ToolProgress: Equatable, Sendable {
    /// The longest `text` the daemon sends, in characters.
    public static let maxTextCharacters = 200

    public var message: String
    public var call: String
    public var tool: String
    public var progress: Double
    public var total: Double?
    public var text: String?

    public init(message: String, call: String, tool: String, progress: Double, total: Double? = nil, text: String? = nil) {
        self.message = message
        self.call = call
        self.tool = tool
        self.progress = progress
        self.total = total
        self.text = text
    }

    var params: [String: JSON] {
        var params: [String: JSON] = ["message": .string(message), "call": .string(call), "tool": .string(tool),
                                      "progress": Self.number(progress)]
        if let total { params["total"] = Self.number(total) }
        if let text { params["text"] = .string(text) }
        return params
    }

    init?(params: JSON) {
        guard let message = params["message"]?.string, let call = params["call"]?.string,
              let progress = params["progress"]?.double else { return nil }
        self.init(message: message, call: call, tool: params["tool"]?.string ?? "?", progress: progress,
                  total: params["total"]?.double, text: params["text"]?.string)
    }

    /// A whole number as an integer (`3`, not `3.0`).
    private static func number(_ value: Double) -> JSON {
        JSON.integralValue(value).map(JSON.int) ?? .double(value)
    }

    /// `3/10 counting`, `40%`, `7`: how far, in a few characters, then the tool's words.
    public var summary: String {
        func shown(_ value: Double) -> String {
            if let whole = JSON.integralValue(value) { return String(whole) }
            guard abs(value) < 1e15 else { return "\(value)" }
            let tenths = Int((value * 10).rounded())
            return (tenths < 0 ? "-" : "") + "\(abs(tenths) / 10).\(abs(tenths) % 10)"
        }
        var line = total.map { "\(shown(progress))/\(shown($0))" } ?? shown(progress)
        if let text, !text.isEmpty { line += " " + text }
        return line
    }
}
