import ConfabProtocol
import EventLoop
import Tools
import Upstream

/// A reply in flight, from the moment the runner starts it to the moment it is over: the one
/// object that holds its chain's state (the message streaming, the request it was asked with,
/// the stream, the retry timer, its tool calls and the turns they led to, the continuation it
/// extends). The runner creates it and every handler of its I/O reaches it directly, holding
/// it until the handler is dropped: the stream and a tool's HTTP call drop theirs when they end
/// or are cancelled, a timer when it is closed, a log sync when it has answered. `leave` is the
/// one way out: it stops all of that and takes it from its conversation, so a handler that
/// still comes (a sync answering later) finds it `isOver` and does nothing.
final class Reply {
    var message: Message
    var request: ChatRequest
    var stream: (any UpstreamCall)?
    /// Waiting to try the upstream again after a refusal that streamed nothing.
    var retryTimer: Timer?
    var attempts = 0
    var unsavedText = ""
    /// Reasoning streamed since the last save, saved with the text (`reply.reasoning` records).
    var unsavedReasoning = ""
    /// The reasoning items of this turn's answer the API wants back (`ReplyEvent.reasoningItem`),
    /// in order; an attempt starts them afresh.
    var reasoningItems: [JSON] = []
    var lastSave: UInt64
    /// How the reply ended, while that final record is being made durable. Clients still
    /// see `message` (streaming) until the ending is announced.
    var ending: Message?
    /// A continuation (`message.continue`) of a reply that stopped for length: the text it
    /// already had (UTF-8 bytes) and the usage of the requests before, added at the end.
    var continued: (bytes: Int, usage: Usage?)?
    /// The final record is being made durable; the reply can no longer be cancelled.
    var isFinishing: Bool { ending != nil }
    /// Its turn's message has been announced (`message.created`, or `message.continued` for a
    /// continuation); until then its context is being read, or a summary written first.
    var isAnnounced = false
    /// The sequence number every message of this reply has (`m2`, `m2.1`, …).
    let chain: Int
    /// The step the next message of the reply gets.
    var nextStep: Int
    /// The form of a textless tool-call turn the server refused in this turn's request, once
    /// the other form has been tried instead (it is tried once a turn).
    var refusedToolCallTurnContent: ToolCallTurnContent?
    /// The images of this turn's request the server refused, once it has been sent again with
    /// each as a line naming it instead (that is tried once a turn).
    var withdrawnImages: [String]?
    /// Turns that asked for tools so far.
    var toolRounds = 0
    /// The reasoning items each turn of this chain that asked for tools was given with, by its
    /// first call's id: the next turn's request carries them back (the Responses API refuses
    /// a function call without the reasoning item it came after).
    var reasoningReplays: [String: ReasoningReplay] = [:]
    /// Who asked for the reply; a call of a reply another user asked for waits for the owner's yes.
    var requestedBy: Author?
    /// The calls of the turn that asked for tools, while any has not been stored.
    var toolRuns: [ToolRun] = []
    /// A summary was asked for before its first turn (`compact_at`), and why none was made, if it failed.
    var compactionTried = false
    var compactionFailure: String?
    var isRunningTools: Bool { !toolRuns.isEmpty }

    init(message: Message, request: ChatRequest, now: UInt64) {
        self.message = message
        self.request = request
        self.lastSave = now
        chain = message.order.sequence
        nextStep = message.order.step + 1
    }

    /// It left its conversation (`leave`): handlers still pending do nothing.
    private(set) var isOver = false

    /// Stops whatever is talking to the upstream or to a tool for this reply, or waiting to.
    func stop() {
        stream?.cancel()
        stream = nil
        retryTimer?.close()
        retryTimer = nil
        for run in toolRuns { run.stop() }
    }

    /// The reply is over in `conversation` (ended, its conversation deleted, or shutdown): what it
    /// was doing stops and the conversation no longer has it in flight.
    func leave(_ conversation: Conversation) {
        stop()
        isOver = true
        if conversation.active === self { conversation.active = nil }
    }
}

/// One tool call of a reply: its message (role `tool`) from the moment it is asked for to
/// the moment its ending is stored.
final class ToolRun {
    let call: ToolCall
    var message: Message
    /// nil when the conversation does not offer the tool.
    let tool: OfferedTool?
    /// The checked arguments; nil when they failed the check (`refusal` says why).
    var arguments: JSON?
    /// Why the call will not be made, decided before anything is sent.
    var refusal: MessageError?
    /// The call its tool's source is making, until it ends.
    var inFlight: (any ToolCallHandle)?
    var approvalTimer: Timer?
    /// `tool.progress` is sent at most once per `ReplyRunner.progressIntervalMilliseconds`:
    /// when the last one went, the newest held back since, and the timer that sends it.
    var progressSentAt: UInt64?
    var heldProgress: ToolProgress?
    var progressTimer: Timer?
    /// Its ending is decided (being stored, or stored).
    var ending: Message?
    /// Its ending is stored and announced.
    var isStored = false

    init(call: ToolCall, message: Message, tool: OfferedTool?) {
        self.call = call
        self.message = message
        self.tool = tool
    }

    var isWaitingForApproval: Bool { ending == nil && message.tool?.approval == .pending }

    func stop() {
        inFlight?.cancel()
        inFlight = nil
        approvalTimer?.close()
        approvalTimer = nil
        progressTimer?.close()
        progressTimer = nil
    }
}
