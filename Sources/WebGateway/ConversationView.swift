import ConfabProtocol
import Terminal

/// One conversation as a page shows it, kept up to date from the daemon's notifications,
/// and the events a page is sent. Every string of a message goes to the page as text, to be
/// set with `textContent`; the only markup is `html`, the reply's markdown rendered here.
///
/// Page events (JSON text frames, `type` first):
/// - `state`: `{conversation, messages, clients, role}`, everything, after an attach;
///   a user message's files are its `attachments`, one `[attached: NAME, SIZE, TYPE]` line each;
/// - `message`: `{message}`, one message as it is now (created, grown by a delta, ended);
/// - `clients`: `{clients}`, the names of everybody attached;
/// - `info`: `{conversation}`, renamed or reconfigured;
/// - `retrying`: `{message, attempt, delay_ms}`;
/// - a reply that thought has `reasoning`: `{text, seconds, thinking}` (drawn as a folded block);
/// - `summary`: `{summary}`, the summary in force (`{after, line, text}`: drawn as one line
///   after message `after`, its text folded under it) or null once undone; also in `state`;
/// - `gone`: `{reason}`, deleted or no longer shared;
/// - `created`: `{conversation}`, on the list, the conversation its "New" made.
///
/// A message carries its `created` time, a reply its `model`, a failure its `error` in words
/// (`errorWords`), a tool card its `state` as its label reads (`toolState`) and who decided
/// its approval (`answered`: stored with the message, so a reload keeps it).
public struct ConversationView: Sendable {
    public private(set) var info: ConversationInfo?
    private var messages: [String: Message] = [:]
    private var clients: [ClientInfo] = []
    /// Who answered each approval, by call id, as this gateway saw it.
    private var answers: [String: String] = [:]
    /// Calls by id, from the replies that made them and from approval requests.
    private var calls: [String: ToolCall] = [:]
    /// The summary in force: every message stays on the page, and one line says where it stands.
    private var compaction: Compaction?
    public let role: String
    /// What tells the time (when thinking began and ended, as this gateway saw it).
    private let now: @Sendable () -> Timestamp

    public init(role: String, clock: @escaping @Sendable () -> Timestamp = { Timestamp.now() }) {
        self.role = role
        now = clock
    }

    public mutating func load(_ attach: AttachResult) -> JSON {
        info = attach.conversation
        messages = [:]
        for message in attach.messages + attach.tools + (attach.pending.map { [$0] } ?? []) {
            store(message)
        }
        clients = attach.clients
        compaction = attach.compaction
        return state
    }

    public var state: JSON {
        [
            "type": "state",
            "conversation": info.map(Self.infoView) ?? .null,
            "messages": .array(orderedMessages.map(view)),
            "clients": clientNames,
            "role": .string(role),
            "summary": compaction.map(Self.summaryView) ?? .null,
        ]
    }

    /// A summary as the page's line shows it: after its last message, `m1…m40 summarised
    /// (1,234 tokens)`, and its text (set as text) to unfold.
    static func summaryView(_ compaction: Compaction) -> JSON {
        ["after": .string(compaction.last),
         "line": .string("\(compaction.first)…\(compaction.last) summarised (\(Compaction.grouped(compaction.tokens)) tokens)"),
         "text": .string(compaction.summary)]
    }

    private var orderedMessages: [Message] {
        messages.values.sorted { $0.order < $1.order }
    }

    private var clientNames: JSON { .array(clients.map { .string(Self.shown($0)) }) }

    /// A client as pages name it: the name it chose with the login the kernel vouches for
    /// beside it, as the terminal shows it (PersonName).
    public static func shown(_ client: ClientInfo) -> String {
        PersonName.shown(name: client.name, login: client.login)
    }

    private mutating func store(_ message: Message) {
        messages[message.id] = message
        for call in message.toolCalls ?? [] { calls[call.id] = call }
    }

    /// The page events one daemon event makes (none for what a page does not show).
    public mutating func apply(_ event: ConversationEvent) -> [JSON] {
        switch event {
        case .messageCreated(let message), .messageCompleted(let message), .messageContinued(let message),
             .toolCompleted(let message):
            store(message)
            return [messageEvent(message.id)]
        case .messageFailed(let message, _):
            store(message)
            return [messageEvent(message.id)]
        case .messageDelta(let id, let content):
            guard var message = messages[id] else { return [] }
            message.content += content
            // The first text ends the thinking.
            if !content.isEmpty, message.reasoning != nil, message.reasoning?.ended == nil { message.reasoning?.ended = now() }
            messages[id] = message
            return [messageEvent(id)]
        case .messageReasoning(let id, let content):
            // The page's folded thinking block grows with each piece.
            guard var message = messages[id], !content.isEmpty else { return [] }
            var thought = message.reasoning ?? Reasoning(text: "", started: now())
            // Thinking again after the answer began: the block opens again, its clock goes on.
            if thought.ended != nil { thought.resume(at: now()) }
            thought.text += content
            message.reasoning = thought
            messages[id] = message
            return [messageEvent(id)]
        case .messageRetrying(let id, let attempt, let delay, _):
            return [["type": "retrying", "message": .string(id), "attempt": .int(attempt), "delay_ms": .int(delay)]]
        case .messageSuperseded(let id, let by):
            guard var message = messages[id] else { return [] }
            message.supersededBy = by
            messages[id] = message
            return [messageEvent(id)]
        case .generationCancelled(let id, let by):
            if let by { answers["cancel:" + id] = Self.shown(by) }
            return []
        case .toolApprovalRequested(let message, let call):
            calls[call.id] = call
            if let message {
                store(message)
                return [messageEvent(message.id)]
            }
            return []
        case .toolApproved(let call, let by):
            answers[call] = "approved by " + (by.map(Self.shown) ?? "somebody")
            return toolMessageEvents(call: call, approval: .approved)
        case .toolDenied(let call, let by):
            answers[call] = by.map { "denied by " + Self.shown($0) } ?? "denied: nobody answered in time"
            return toolMessageEvents(call: call, approval: .denied)
        case .toolStarted(let message, let call):
            calls[call.id] = call
            store(message)
            return [messageEvent(message.id)]
        case .conversationUpdated(let info, _):
            self.info = info
            return [["type": "info", "conversation": Self.infoView(info)]]
        case .conversationDeleted:
            return [["type": "gone", "reason": "The conversation was deleted."]]
        case .conversationUnshared:
            return [["type": "gone", "reason": "The conversation is no longer shared."]]
        case .clientAttached(let client):
            clients.removeAll { $0.id == client.id }
            clients.append(client)
            return [["type": "clients", "clients": clientNames]]
        case .clientDetached(let client):
            clients.removeAll { $0.id == client.id }
            return [["type": "clients", "clients": clientNames]]
        case .toolProgress:
            // The page shows a call's result once it ends.
            return []
        case .compactionCompleted(let done):
            compaction = done
            return [["type": "summary", "summary": Self.summaryView(done)]]
        case .compactionUndone:
            compaction = nil
            return [["type": "summary", "summary": .null]]
        case .compactionStarted, .compactionDelta, .compactionFailed:
            // A summary being written changes nothing on the page until it is stored.
            return []
        }
    }

    private mutating func toolMessageEvents(call: String, approval: ToolApprovalState) -> [JSON] {
        guard var message = messages.values.first(where: { $0.tool?.callID == call }) else { return [] }
        message.tool?.approval = approval
        messages[message.id] = message
        return [messageEvent(message.id)]
    }

    private func messageEvent(_ id: String) -> JSON {
        guard let message = messages[id] else { return .null }
        return ["type": "message", "message": view(message)]
    }

    /// A reply's thought as the page's folded block draws it: its markdown rendered as a reply's
    /// is (the model's HTML in it shown as text), the seconds spent so far, and whether the
    /// model still thinks (the page counts on from there). `text` stays for what copies it.
    static func thoughtView(_ thought: Reasoning, now: Timestamp) -> JSON {
        ["text": .string(thought.text), "html": .string(MarkdownHTML.render(thought.text)),
         "seconds": .int(thought.seconds(now: now)), "thinking": .bool(thought.ended == nil)]
    }

    static func infoView(_ info: ConversationInfo) -> JSON {
        ["id": .string(info.id), "title": .string(info.title), "model": .string(info.model)]
    }

    /// One message as the page draws it.
    public func view(_ message: Message) -> JSON {
        var object: [String: JSON] = [
            "id": .string(message.id),
            "role": .string(message.role.rawValue),
            "status": .string(message.status.rawValue),
        ]
        if let author = message.author { object["author"] = .string(PersonName.shown(name: author.name, login: author.login)) }
        if message.supersededBy != nil { object["superseded"] = true }
        if message.isCutAtLengthLimit && message.status != .streaming { object["cut_off"] = true }
        object["created"] = .string(message.created.description)
        if message.role == .assistant, let model = message.model { object["model"] = .string(model) }
        if let error = message.error { object["error"] = .string(Self.errorWords(error)) }
        if let replies = message.quickReplies, !replies.isEmpty {
            object["quick_replies"] = .array(replies.map(JSON.string))
        }
        switch message.role {
        case .tool:
            var card: [String: JSON] = ["result": .string(message.content)]
            if let tool = message.tool {
                card["call"] = .string(tool.callID)
                card["name"] = .string(tool.name)
                if let call = calls[tool.callID] { card["arguments"] = .string(call.arguments) }
                if let status = tool.httpStatus { card["http_status"] = .int(status) }
                if let duration = tool.durationMilliseconds { card["duration_ms"] = .int(duration) }
                if let approval = tool.approval { card["approval"] = .string(approval.rawValue) }
                card["state"] = .string(Self.toolState(message))
                // Who decided: stored with the message (so after a reload too), else as this
                // gateway saw it happen.
                if let decider = tool.decidedBy, let approval = tool.approval, approval != .pending {
                    card["answered"] = .string(approval.rawValue + " by " + PersonName.shown(name: decider.name, login: decider.login))
                } else if let answer = answers[tool.callID] {
                    card["answered"] = .string(answer)
                }
                if tool.truncated { card["truncated"] = true }
            }
            object["tool"] = .object(card)
        case .user:
            // What a person typed is shown as typed: no markdown, line breaks kept.
            object["text"] = .string(message.content)
            // The terminal's lines, names with their controls made visible; set as text.
            if let attachments = message.attachments, !attachments.isEmpty {
                object["attachments"] = .array(attachments.map { .string(AttachmentText.line($0)) })
            }
        case .assistant, .system:
            if let thought = message.reasoning, message.role == .assistant { object["reasoning"] = Self.thoughtView(thought, now: now()) }
            object["html"] = .string(MarkdownHTML.render(message.content))
            if let calls = message.toolCalls, !calls.isEmpty {
                object["tool_calls"] = .array(calls.map { ["name": .string($0.name), "arguments": .string($0.arguments)] })
            }
        }
        if let by = answers["cancel:" + message.id] { object["cancelled_by"] = .string(by) }
        return .object(object)
    }

    /// A tool card's state, in the words its label shows.
    public static func toolState(_ message: Message) -> String {
        switch message.status {
        case .streaming: return message.tool?.approval == .pending ? "waiting for approval" : "running"
        case .complete: return "done"
        case .failed: return message.error?.code == .toolDenied ? "denied" : "failed"
        case .cancelled: return "cancelled"
        case .interrupted: return "interrupted"
        }
    }

    /// A failure as a person reads it: what happened in words, then the daemon's own message
    /// (the code stays for the terminal's `--json`).
    public static func errorWords(_ error: MessageError) -> String {
        let headline: String
        switch error.code {
        case .upstreamAuth: headline = "The model server refused the credentials"
        case .rateLimited: headline = "The model server is rate limiting: try again later"
        case .upstreamHTTP: headline = "The model server answered with an error" + (error.status.map { " (HTTP \($0))" } ?? "")
        case .upstreamError: headline = "The model server reported an error while replying"
        case .upstreamConnection: headline = "The model server could not be reached"
        case .upstreamTimeout: headline = "The model server stopped answering"
        case .upstreamProtocol: headline = "The model server's answer could not be read"
        case .notConfigured: headline = "The model server is not configured"
        case .storage: headline = "The reply could not be saved"
        case .contextTooLarge: headline = "The conversation is too long for the model's context"
        case .toolRounds: headline = "The model asked for tools too many times in one reply"
        case .thinkingExhausted: headline = "The model used all its tokens thinking and wrote no answer"
        case .toolArguments: headline = "The model called the tool with arguments it does not take"
        case .toolUnavailable: headline = "The model asked for a tool this conversation does not offer"
        case .toolDenied: headline = "The call was not made"
        case .toolTimeout: headline = "The tool did not answer in time"
        case .toolConnection: headline = "The tool could not be reached"
        case .toolError: headline = "The tool reported an error"
        }
        return headline + ". " + error.message
    }

    /// The conversation list as a page shows it, with who is attached to each and whether a
    /// reply streams there, where known.
    public static func listEvent(_ conversations: [ConversationInfo], activity: [String: ListActivity] = [:]) -> JSON {
        [
            "type": "list",
            "conversations": .array(conversations.map { info in
                var entry: [String: JSON] = [
                    "id": .string(info.id), "title": .string(info.title), "model": .string(info.model),
                    "updated": .string(info.updated.description), "messages": .int(info.messageCount),
                ]
                if let activity = activity[info.id] {
                    entry["clients"] = .array(activity.clients.map { .string(shown($0)) })
                    entry["streaming"] = .bool(!activity.streaming.isEmpty)
                }
                return .object(entry)
            }),
        ]
    }
}

/// What the list page tells the person of a conversation it follows: a call waiting for the
/// owner's approval (a share link's holder cannot give it), or a reply chain's end (the last
/// reply, not one that only asks for tools). The page counts these in its title while it is
/// hidden and shows a notification naming the conversation once the person allowed them.
public enum ListAttention {
    /// `{"type": "attention", conversation, message, title, text}`, or nil when the event
    /// needs nobody.
    public static func event(_ event: ConversationEvent, conversation: String, title: String, owner: Bool) -> JSON? {
        let message: String
        let text: String
        switch event {
        case .toolApprovalRequested(_, let call) where owner:
            message = call.id
            text = "A tool call waits for your approval: " + call.name
        case .messageCompleted(let reply) where reply.role == .assistant && (reply.toolCalls ?? []).isEmpty,
             .messageFailed(let reply, _) where reply.role == .assistant:
            message = reply.id
            text = reply.status == .complete ? "The reply is ready" : "The reply ended: " + reply.status.rawValue
        default:
            return nil
        }
        return ["type": "attention", "conversation": .string(conversation), "message": .string(message),
                "title": .string(title), "text": .string(text)]
    }
}

/// What the list shows of a conversation beyond its summary: who is attached, and whether a
/// reply (or one of its tool calls) is in flight. Followed with a quiet attach, so the list
/// page itself is in nobody's presence list.
public struct ListActivity: Equatable, Sendable {
    public private(set) var clients: [ClientInfo] = []
    /// Messages in flight, by id.
    public private(set) var streaming: Set<String> = []

    public init(_ attach: AttachResult) {
        clients = attach.clients
        if let pending = attach.pending { streaming.insert(pending.id) }
        for tool in attach.tools { streaming.insert(tool.id) }
    }

    /// Whether the event changed what the list shows.
    public mutating func apply(_ event: ConversationEvent) -> Bool {
        let before = self
        switch event {
        case .messageCreated(let message), .messageContinued(let message), .toolStarted(let message, _):
            if message.status == .streaming { streaming.insert(message.id) }
        case .messageCompleted(let message), .toolCompleted(let message), .messageFailed(let message, _):
            streaming.remove(message.id)
        case .clientAttached(let client):
            clients.removeAll { $0.id == client.id }
            clients.append(client)
        case .clientDetached(let client):
            clients.removeAll { $0.id == client.id }
        default:
            break
        }
        return self != before
    }
}
