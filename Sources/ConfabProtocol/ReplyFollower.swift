// How one reply unfolds on the wire, as a state machine every client shares: fed the
// conversation's notifications in order, it reports what happened to the reply, from its
// `message.created` through deltas, retries, tool calls and approvals to the chain's end
// (docs/protocol.md, "One reply, several messages"). It does no I/O; `confab ask`, the
// shell key and `confab attach` only render what it reports.

/// What following a reply found, in the order it happened.
public enum ReplyProgress: Equatable, Sendable {
    /// A turn of the reply begins: the reply itself, or the model's next turn after tool calls;
    /// its message when the start came with one (its text so far comes as `text`).
    case turnStarted(String, Message?)
    /// A stored reply goes on (`message.continue`): its text so far is not reported again.
    case continued(Message)
    /// Text of `turn` not reported before (a delta, or what the turn's stored text holds beyond them).
    case text(turn: String, String)
    /// Reasoning of `turn` not reported before (a `message.reasoning` piece, or what the stored
    /// reasoning holds beyond them); `thought` is the turn's reasoning so far, its `started`
    /// the daemon's when known (a late attach), else when the first piece came here.
    case reasoning(turn: String, String, thought: Reasoning)
    /// The turn stopped thinking: its answer (text, a tool call) began, or the turn ended.
    case reasoningEnded(turn: String, thought: Reasoning)
    /// The upstream refused before any text; the daemon asks again after `delayMilliseconds`.
    case retrying(attempt: Int, delayMilliseconds: Int, error: MessageError?)
    /// Someone stopped the reply (its end follows).
    case cancelled(by: ClientInfo?)
    /// A turn ended and all its text has been reported; when it asked for tools the reply goes on.
    case turnEnded(Message)
    /// The turn asked for these calls; the reply goes on after them.
    case toolsRequested([ToolCall])
    /// A call waits for a person's yes.
    case approvalRequested(ToolCall)
    /// A call's approval was decided by `by` (nil: nobody answered in time).
    case approvalDecided(ToolCall, allowed: Bool, by: ClientInfo?)
    /// A call's HTTP request begins.
    case toolStarted(ToolCall)
    /// A call ended: its stored tool message.
    case toolEnded(Message, call: ToolCall)
    /// The reply is over; nothing follows.
    case finished(ReplyEnd)
}

/// How a reply ended.
public struct ReplyEnd: Equatable, Sendable {
    public enum Outcome: Equatable, Sendable {
        case complete
        /// Complete as far as the model went: it reached its token limit (`confab continue`).
        case cutAtLengthLimit
        case cancelled(by: ClientInfo?)
        case failed(MessageError?)
        /// The daemon stopped or died mid-reply.
        case interrupted
        /// The conversation was deleted under it.
        case conversationDeleted
        /// The owner (`by`) stopped sharing the conversation with this user: the reply may go
        /// on, but nothing more of it reaches this client.
        case unshared(by: ClientInfo?)
    }

    public var outcome: Outcome
    /// The reply's last turn as stored; nil when the conversation was deleted or unshared.
    public var message: Message?

    public init(outcome: Outcome, message: Message?) {
        self.outcome = outcome
        self.message = message
    }

    public static func of(_ message: Message, error: MessageError? = nil, cancelledBy: ClientInfo? = nil) -> ReplyEnd {
        switch message.status {
        case .failed: ReplyEnd(outcome: .failed(error ?? message.error), message: message)
        case .cancelled: ReplyEnd(outcome: .cancelled(by: cancelledBy), message: message)
        case .interrupted: ReplyEnd(outcome: .interrupted, message: message)
        case .complete, .streaming:
            ReplyEnd(outcome: message.isCutAtLengthLimit ? .cutAtLengthLimit : .complete, message: message)
        }
    }
}

public struct ReplyFollower: Sendable {
    public let conversation: String
    /// The reply's first message: `m4`; its tool results and later turns are `m4.N`.
    public let reply: String
    private let chain: Int
    /// The turn streaming now.
    public private(set) var turn: String
    /// What of the current turn was reported, byte for byte (after `before`).
    private var reported: [UInt8] = []
    /// The turn's text from before we followed it (a continued reply's): not ours to report.
    private var before = 0
    /// The reply has started (created, or text came): cancelling it now stops it.
    public private(set) var started = false
    public private(set) var end: ReplyEnd?
    /// Every call of the reply seen, by id.
    public private(set) var calls: [String: ToolCall] = [:]
    /// Calls waiting for a yes, oldest first.
    public private(set) var awaitingApproval: [ToolCall] = []
    /// Calls whose request runs, oldest first.
    public private(set) var running: [ToolCall] = []
    private var cancelledBy: ClientInfo?
    private var endedTurns: Set<String> = []
    private var endedTools: Set<String> = []
    private var announcedTurns: Set<String> = []
    /// Each turn's reasoning as far as it was reported, by turn id.
    public private(set) var thoughts: [String: Reasoning] = [:]
    /// What tells the time (pieces are stamped when they come); a test sets its own.
    public var clock: @Sendable () -> Timestamp = { Timestamp.now() }

    /// The turn thinking now, with its thought so far; nil when no turn is thinking.
    public var thinking: (turn: String, thought: Reasoning)? {
        guard let thought = thoughts[turn], thought.ended == nil, end == nil else { return nil }
        return (turn, thought)
    }

    public init(conversation: String, reply: String) {
        self.conversation = conversation
        self.reply = reply
        chain = MessageID.sequence(of: reply) ?? -1
        turn = reply
    }

    public var isFinished: Bool { end != nil }

    /// Whether message `id` is part of this reply (the reply, its tool results, its later turns).
    public func owns(_ id: String?) -> Bool {
        guard let id, let sequence = MessageID.sequence(of: id) else { return false }
        return sequence == chain
    }

    /// What `notification` means for the reply; nothing for what is not about it.
    public mutating func take(_ notification: ServerNotification) -> [ReplyProgress] {
        guard end == nil, case .conversation(let id, let event) = notification, id == conversation else { return [] }
        return take(event)
    }

    public mutating func take(_ event: ConversationEvent) -> [ReplyProgress] {
        guard end == nil else { return [] }
        var out: [ReplyProgress] = []
        switch event {
        case .messageCreated(let message) where owns(message.id):
            if message.role == .tool {
                if message.status != .streaming { toolEnded(message, into: &out) }
            } else if message.role == .assistant {
                begin(message.id, message, into: &out)
                catchUp(message, into: &out)
            }
        case .messageContinued(let message) where owns(message.id):
            started = true
            turn = message.id
            announcedTurns.insert(message.id)
            endedTurns.remove(message.id)
            reported = []
            before = message.content.utf8.count
            out.append(.continued(message))
        case .messageReasoning(let id, let content) where owns(id):
            begin(id, into: &out)
            guard !content.isEmpty else { break }
            var thought = thoughts[id] ?? Reasoning(text: "", started: clock())
            // Thinking again after the answer began: the thought opens again, its clock goes on.
            if thought.ended != nil { thought.resume(at: clock()) }
            thought.text += content
            thoughts[id] = thought
            out.append(.reasoning(turn: id, content, thought: thought))
        case .messageDelta(let id, let content) where owns(id):
            begin(id, into: &out)
            guard !content.isEmpty else { break }
            stopThinking(id, at: nil, into: &out)
            reported += content.utf8
            out.append(.text(turn: id, content))
        case .messageRetrying(let id, let attempt, let delay, let error) where owns(id):
            out.append(.retrying(attempt: attempt, delayMilliseconds: delay, error: error))
        case .generationCancelled(let id, let by) where owns(id):
            cancelledBy = by
            out.append(.cancelled(by: by))
        case .toolApprovalRequested(let message, let call) where owns(message?.id) || calls[call.id] != nil:
            let known = calls[call.id] ?? call
            calls[call.id] = known
            if !awaitingApproval.contains(where: { $0.id == call.id }) {
                awaitingApproval.append(known)
                out.append(.approvalRequested(known))
            }
        case .toolApproved(let id, let by), .toolDenied(let id, let by):
            guard let call = calls[id], awaitingApproval.contains(where: { $0.id == id }) else { break }
            awaitingApproval.removeAll { $0.id == id }
            if case .toolApproved = event {
                out.append(.approvalDecided(call, allowed: true, by: by))
            } else {
                out.append(.approvalDecided(call, allowed: false, by: by))
            }
        case .toolStarted(let message, let call) where owns(message.id):
            calls[call.id] = call
            awaitingApproval.removeAll { $0.id == call.id }
            if !running.contains(where: { $0.id == call.id }) {
                running.append(call)
                out.append(.toolStarted(call))
            }
        case .toolCompleted(let message) where owns(message.id):
            toolEnded(message, into: &out)
        case .messageCompleted(let message) where owns(message.id):
            ended(message, error: nil, into: &out)
        case .messageFailed(let message, let error) where owns(message.id):
            ended(message, error: error, into: &out)
        case .conversationDeleted:
            end = ReplyEnd(outcome: .conversationDeleted, message: nil)
            out.append(.finished(end!))
        case .conversationUnshared(let by):
            end = ReplyEnd(outcome: .unshared(by: by), message: nil)
            out.append(.finished(end!))
        default:
            break
        }
        return out
    }

    /// After a reconnection: the reply's messages as stored now (a `conversation.attach`'s
    /// `messages`, `pending` and `tools`), oldest first. Reports what was missed while no
    /// notification could arrive, and nothing twice.
    public mutating func resume(stored: [Message], pending: Message?, tools: [Message]) -> [ReplyProgress] {
        var out: [ReplyProgress] = []
        let ours = (stored + tools + (pending.map { [$0] } ?? [])).filter { owns($0.id) }.sorted { $0.order < $1.order }
        for message in ours where end == nil {
            if message.role == .tool {
                if message.status == .streaming {
                    if let callID = message.tool?.callID, let call = calls[callID] ?? message.tool.map({ ToolCall(id: $0.callID, name: $0.name, arguments: "") }) {
                        calls[callID] = call
                        if message.tool?.approval == .pending, !awaitingApproval.contains(where: { $0.id == callID }) {
                            awaitingApproval.append(call)
                            out.append(.approvalRequested(call))
                        }
                    }
                } else {
                    toolEnded(message, into: &out)
                }
            } else if message.role == .assistant {
                if message.status == .streaming {
                    begin(message.id, message, into: &out)
                    catchUp(message, into: &out)
                } else {
                    ended(message, error: message.error, into: &out)
                }
            }
        }
        return out
    }

    // MARK: Steps

    private mutating func begin(_ id: String, _ message: Message? = nil, into out: inout [ReplyProgress]) {
        started = true
        if id != turn {
            turn = id
            reported = []
            before = 0
        }
        if announcedTurns.insert(id).inserted { out.append(.turnStarted(id, message)) }
    }

    /// What the turn's stored text holds beyond what was reported (a delta lost to a
    /// reconnection, or none at all when we attached late).
    private mutating func catchUp(_ message: Message, into out: inout [ReplyProgress]) {
        if let stored = message.reasoning {
            var thought = thoughts[message.id] ?? Reasoning(text: "", started: stored.started)
            // The daemon's clock says when thinking began; ours only when we first heard of it.
            thought.started = stored.started
            thought.redactedBlocks = stored.redactedBlocks
            let known = Array(thought.text.utf8), whole = Array(stored.text.utf8)
            if thought.ended == nil, whole.count > known.count, whole.starts(with: known) {
                let rest = String(decoding: whole[known.count...], as: UTF8.self)
                thought.text = stored.text
                thoughts[message.id] = thought
                out.append(.reasoning(turn: message.id, rest, thought: thought))
            } else {
                thoughts[message.id] = thought
            }
            if let ended = stored.ended { stopThinking(message.id, at: ended, into: &out) }
        }
        if !message.content.isEmpty || !(message.toolCalls ?? []).isEmpty { stopThinking(message.id, at: nil, into: &out) }
        let content = Array(message.content.utf8.dropFirst(before))
        guard content.count > reported.count, content.starts(with: reported) else { return }
        let rest = String(decoding: content[reported.count...], as: UTF8.self)
        reported = content
        out.append(.text(turn: message.id, rest))
    }

    /// The turn's thinking is over (at `ended`, the daemon's time when known): said once.
    private mutating func stopThinking(_ id: String, at ended: Timestamp?, into out: inout [ReplyProgress]) {
        guard var thought = thoughts[id], thought.ended == nil else { return }
        thought.ended = ended ?? clock()
        thoughts[id] = thought
        out.append(.reasoningEnded(turn: id, thought: thought))
    }

    private mutating func toolEnded(_ message: Message, into out: inout [ReplyProgress]) {
        guard endedTools.insert(message.id).inserted else { return }
        let callID = message.tool?.callID ?? ""
        let call = calls[callID] ?? ToolCall(id: callID, name: message.tool?.name ?? "?", arguments: "")
        running.removeAll { $0.id == callID }
        awaitingApproval.removeAll { $0.id == callID }
        out.append(.toolEnded(message, call: call))
    }

    private mutating func ended(_ message: Message, error: MessageError?, into out: inout [ReplyProgress]) {
        if message.role == .tool {
            toolEnded(message, into: &out)
            return
        }
        guard message.role == .assistant, endedTurns.insert(message.id).inserted else { return }
        var message = message
        if message.error == nil { message.error = error }
        begin(message.id, message, into: &out)
        catchUp(message, into: &out)
        stopThinking(message.id, at: nil, into: &out)
        // The stored thought is the whole one; what clients show of a finished turn is it.
        if let stored = message.reasoning { thoughts[message.id] = stored }
        out.append(.turnEnded(message))
        if message.continuesAfterTools {
            let asked = message.toolCalls ?? []
            for call in asked { calls[call.id] = call }
            out.append(.toolsRequested(asked))
            return
        }
        end = ReplyEnd.of(message, error: error, cancelledBy: cancelledBy)
        out.append(.finished(end!))
    }
}
