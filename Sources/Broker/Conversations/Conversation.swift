import ConfabProtocol
import EventLoop
import LogStore
import Tools
import Upstream

/// A conversation: its summary always, its messages once read, its log, who is attached, and
/// its replies. Replies run one at a time, in the order their sends were stored.
///
/// At start-up only summaries are known (`onDisk`); the messages are read from the log the first
/// time a request needs them, and requests about the conversation that arrive meanwhile wait
/// behind the read, in order, so none sees it half read.
final class Conversation {
    let id: String
    let created: Timestamp
    var title: String
    /// When its log was last written to: the same rule whether the conversation is in memory,
    /// only summarised, or read back after a restart, so `conversation.list` keeps one order.
    var updated: Timestamp { log.updated }
    var model: String
    /// Never given a model: `model` follows the configured default (`DefaultModel.swift`).
    var modelIsDefault: Bool
    var system: String?
    let forkedFrom: ForkOrigin?
    /// The name of the configured provider its replies come from.
    let provider: String
    var profile: String?
    /// Asked for with every reply, over the provider's defaults.
    var params: SamplingParameters
    let log: ConversationLog
    /// Stored messages in id order, when in memory; the reply in flight is in `active`, not here.
    /// Those read from the log are known by where they are in it, and their texts read from it
    /// when needed (`messages(_:)`); those written since are held whole.
    private(set) var entries: [StoredEntry] = []
    private var nextSequence = 1
    /// Attached clients, in attach order: everybody gets every notification in one order.
    private(set) var attached: [ClientSession] = []
    /// Reply ids reserved by stored sends, waiting for their turn.
    private(set) var queue: [String] = []
    /// The reply in flight (one at a time): set by `ReplyRunner` when it starts one, cleared
    /// when the reply is over (`Reply.leave`).
    var active: Reply?
    var isDeleted = false
    /// Reported over estimated prompt tokens of its last reply whose upstream reported usage:
    /// corrects the context budget's estimate. In memory only; nil until such a reply.
    var contextRatio: Double?
    /// The summary in force (`Compaction.swift`), when the messages are in memory.
    var compaction: Compaction?
    /// The summary being written, if one is.
    var compacting: CompactionJob?

    enum Contents {
        /// Only the summary is in memory.
        case onDisk
        /// The log is being read; requests wait in `waitingForMessages`.
        case loading
        case inMemory
    }
    private(set) var contents: Contents = .onDisk
    /// Requests that came while the log was being read, in arrival order: each is told nil when
    /// it may go on, or why the messages could not be read.
    var waitingForMessages: [(needsMessages: Bool, resume: (RPCError?) -> Void)] = []
    /// `loop.now` when a request last touched it, to tell idle conversations that can leave memory.
    var lastUsed: UInt64 = 0

    /// Known by its summary only; `take(_:)` brings its messages in.
    init(log: ConversationLog) {
        let summary = log.summary
        id = summary.header.id
        created = summary.header.created
        title = summary.title
        model = summary.header.model
        modelIsDefault = summary.header.modelIsDefault
        system = summary.header.system
        forkedFrom = summary.header.forkedFrom
        provider = summary.header.provider ?? ConversationInfo.defaultProvider
        profile = summary.header.profile
        params = summary.header.params
        self.log = log
    }

    func startLoading() {
        precondition(contents == .onDisk)
        contents = .loading
    }

    /// A read failed: back to the summary alone, to be tried again on the next request.
    func loadFailed() { contents = .onDisk }

    /// Takes the messages its log holds. The title and time are the log's too.
    func take(_ replayed: ReplayedConversation) {
        title = replayed.title
        var entries: [StoredEntry] = []
        entries.reserveCapacity(replayed.messages.count + replayed.stored.count)
        for message in replayed.messages { entries.append(.held(message)) }
        for place in replayed.stored { entries.append(.stored(place)) }
        self.entries = entries
        compaction = replayed.compaction
        let messages = entries
        contents = .inMemory
        // One pass over what may be tens of thousands of entries, on the loop.
        // A user message reserved the id after it for its reply, and clients were told that
        // id; a reply that never got a record (a crash, a full disk) must not hand it on.
        // Sends stored after the last reply whose own replies never started were waiting their
        // turn when the daemon stopped or died: they are owed, in order. (A reply that could not
        // start for a full disk is owed too if nothing came after it; once a later reply exists,
        // running it would answer out of order, so it is left.)
        var next = 1
        var lastReply = 0
        var present: Set<Int> = []
        for entry in messages {
            let sequence = entry.sequence, role = entry.role
            next = max(next, sequence + (role == .user ? 2 : 1))
            if role == .assistant { lastReply = max(lastReply, sequence) }
            present.insert(sequence)
        }
        nextSequence = next
        // Regenerated replies recorded and never started are owed too, in id order.
        var owedSends: [Int] = []
        for entry in messages.reversed() {
            let sequence = entry.sequence
            guard sequence > lastReply else { break }
            if entry.role == .user, entry.supersededBy == nil, !present.contains(sequence + 1) { owedSends.append(sequence + 1) }
        }
        let owed = replayed.owedReplies.compactMap(MessageID.sequence(of:))
        queue = Set(owedSends + owed).sorted().map(MessageID.make)
        nextSequence = max(nextSequence, (owed.max() ?? 0) + 1)
        // Who asked is not stored with a queued reply: the author of the user message before it
        // stands for it, so that a reply another user or a share link asked for still holds its
        // tool calls for the owner's yes after a restart.
        requesters = [:]
        for id in queue {
            guard let sequence = MessageID.sequence(of: id),
                  let entry = messages.last(where: { $0.role == .user && $0.sequence < sequence }),
                  let asker = try? self.messages([entry]).first?.author else { continue }
            requesters[id] = asker
        }
    }

    /// Nothing in flight, nobody attached, nothing waiting: its messages can leave memory.
    var isIdle: Bool {
        contents == .inMemory && attached.isEmpty && active == nil && compacting == nil && queue.isEmpty && sendsBeingStored == 0 && continuing == nil
            && waitingForMessages.isEmpty && !log.isSyncing && !isDeleted
    }

    /// Lets the messages go; the summary (kept by the log) stays for the list.
    func unload() {
        precondition(isIdle)
        entries = []
        queue = []
        continuing = nil
        compaction = nil
        contents = .onDisk
    }

    var info: ConversationInfo {
        ConversationInfo(id: id, title: title, created: created, updated: updated, model: model, system: system,
                         messageCount: contents == .inMemory ? entries.count + (active?.continued == nil ? 0 : 1) : log.messageCount,
                         forkedFrom: forkedFrom, provider: provider, usage: log.summary.usage.usage,
                         profile: profile, params: params, sharedWith: log.shares).withModelDefault(modelIsDefault)
    }

    var queuedCount: Int { queue.count }

    /// Sends whose user message is being stored: their replies are not queued yet, but they
    /// count against the queue limit, or sends pipelined in one read would all get past it.
    var sendsBeingStored = 0

    /// Replies accepted and not yet ended: the one streaming, the queued, and those of sends
    /// still being stored.
    var unfinishedReplies: Int { queue.count + sendsBeingStored + (active == nil ? 0 : 1) }

    /// Reserves ids for a user message and its reply, in conversation order.
    func reserveSend() -> (message: String, reply: String) {
        let ids = (MessageID.make(nextSequence), MessageID.make(nextSequence + 1))
        nextSequence += 2
        return ids
    }

    /// Reserves the id of a regenerated reply.
    func reserveReply() -> String {
        defer { nextSequence += 1 }
        return MessageID.make(nextSequence)
    }

    /// Puts a message in its place by id, replacing the one with the same id (a continued reply).
    func insert(_ message: Message) {
        let order = message.order
        if let last = entries.last, last.order >= order {
            let position = entries.firstIndex { $0.order >= order }!
            if entries[position].order == order {
                entries[position] = .held(message)
            } else {
                entries.insert(.held(message), at: position)
            }
        } else {
            entries.append(.held(message))
        }
    }

    func markSuperseded(_ id: String, by newer: String) {
        guard let position = entries.firstIndex(where: { $0.id == id }) else { return }
        entries[position].supersededBy = newer
    }

    /// The stored messages that make the conversation now, without their texts: none that a
    /// newer one took the place of.
    var current: [StoredEntry] { entries.filter { $0.supersededBy == nil } }

    /// The given entries as messages, those known by place read from the log.
    func messages(_ wanted: some Collection<StoredEntry>) throws(RPCError) -> [Message] {
        let places = wanted.compactMap { entry -> StoredMessage? in
            if case .stored(let place) = entry { return place }
            return nil
        }
        var read: [Message] = []
        if !places.isEmpty {
            do {
                read = try log.readMessages(places)
            } catch {
                throw RPCError(code: RPCError.storageFailed, message: "storage failed: cannot read the conversation's log: \(error)")
            }
        }
        // A page of stored messages only (a history page of a conversation at rest) is the read itself.
        if read.count == wanted.count { return read }
        var next = read.makeIterator()
        return wanted.map { entry in
            switch entry {
            case .held(let message): return message
            case .stored: return next.next()!
            }
        }
    }

    /// Every stored message, read from the log as needed.
    func allMessages() throws(RPCError) -> [Message] { try messages(entries) }

    /// One stored message by id, or nil.
    func message(_ id: String) throws(RPCError) -> Message? {
        guard let entry = entries.first(where: { $0.id == id }) else { return nil }
        return try messages([entry]).first
    }

    /// Nothing in flight, queued or being stored: history can be rewritten by adding records.
    var isSettled: Bool { active == nil && queue.isEmpty && sendsBeingStored == 0 && continuing == nil }

    /// A reply queued to be continued (`message.continue`): its id is in `queue`, and it leaves
    /// `messages` when it starts, as any reply in flight is only in `active`.
    var continuing: String?

    /// Takes a stored reply out of `entries` to continue it.
    func takeForContinuing(_ id: String) -> Message? {
        guard let position = entries.firstIndex(where: { $0.id == id }),
              let message = try? messages([entries[position]]).first else { return nil }
        entries.remove(at: position)
        return message
    }

    /// Who asked for each queued reply (sent the message, regenerated, edited, continued).
    private var requesters: [String: Author] = [:]

    func enqueueReply(_ id: String, requestedBy requester: Author) {
        queue.append(id)
        requesters[id] = requester
    }

    func takeNextReply() -> (id: String, requestedBy: Author?)? {
        guard !queue.isEmpty else { return nil }
        let id = queue.removeFirst()
        return (id, requesters.removeValue(forKey: id))
    }

    func dropQueue() {
        queue = []
        requesters = [:]
        continuing = nil
    }

    /// What the upstream sees for a reply: the system prompt and every earlier turn, in an order
    /// chat APIs accept (user and assistant alternating). A reply that ended with no text (failed,
    /// or cancelled before its first delta) is sent as an empty assistant turn rather than left
    /// out, which would put two user turns in a row; turns of one role that still end up next to
    /// each other (a reply that never got a record, after a crash or a full disk) are sent as one,
    /// joined by a blank line.
    ///
    /// An assistant turn that asked for tools is followed by exactly one tool turn per call, as
    /// the APIs require: a call whose result was never stored (a crash, a turn over the round
    /// limit) is given as not made, and a result that answers no call before it is left out.
    ///
    /// An assistant turn carries its reasoning (`ChatMessage.reasoning`) only when `provider` and
    /// `model` made it: one server's thought never goes to another. What of it is sent is the
    /// adapter's business (each API's pass-back rule).
    static func context(of messages: [Message], system: String?, before reply: String,
                        provider: String? = nil, model: String? = nil) -> [ChatMessage] {
        let limit = MessageID.order(of: reply) ?? MessageOrder(sequence: Int.max)
        var context: [ChatMessage] = []
        if let system, !system.isEmpty { context.append(ChatMessage(role: .system, content: system)) }
        /// Calls of the last assistant turn still owed a result, in call order.
        var owed: [ToolCall] = []
        func notMade(_ calls: some Sequence<ToolCall>) {
            for call in calls {
                context.append(ChatMessage(role: .tool, content: "This call was not made: the reply stopped before it ran.",
                                           toolCallID: call.id, toolName: call.name, isError: true))
            }
        }
        func settleOwed() {
            notMade(owed)
            owed = []
        }
        for message in messages where message.order < limit && message.supersededBy == nil {
            if message.role == .tool {
                guard let tool = message.tool, let position = owed.firstIndex(where: { $0.id == tool.callID }) else { continue }
                // Results go in call order: a call before this one without a result was not made.
                notMade(owed[..<position])
                owed.removeFirst(position + 1)
                context.append(ChatMessage(role: .tool, content: message.content, toolCallID: tool.callID, toolName: tool.name,
                                           isError: message.status != .complete))
                continue
            }
            settleOwed()
            // A user turn's files, by reference: their bytes are read when the reply starts.
            let attachments = message.role == .user ? (message.attachments ?? []).map { ChatAttachment($0) } : []
            guard !message.content.isEmpty || !attachments.isEmpty || message.role == .assistant else { continue }
            let calls = message.role == .assistant ? message.toolCalls ?? [] : []
            var reasoning: ReasoningReplay?
            if message.role == .assistant, let source = message.reasoningSource, source.provider == provider, source.model == model {
                reasoning = ReasoningReplay(api: source.api, provider: source.provider, model: source.model,
                                            text: message.reasoning?.text ?? "", items: source.items)
            }
            if let last = context.last, last.role == message.role, message.role != .system, last.toolCalls.isEmpty {
                let joined = [last.content, message.content].filter { !$0.isEmpty }.joined(separator: "\n\n")
                context[context.count - 1] = ChatMessage(role: last.role, content: joined, toolCalls: calls,
                                                         attachments: last.attachments + attachments, reasoning: reasoning)
            } else {
                context.append(ChatMessage(role: message.role, content: message.content, toolCalls: calls, attachments: attachments,
                                           reasoning: reasoning))
            }
            owed = calls
        }
        settleOwed()
        return context
    }

    func lastMessages(_ count: Int, before: MessageOrder? = nil) throws(RPCError) -> (messages: [Message], more: Bool) {
        let eligible = before.map { limit in entries.prefix { $0.order < limit } } ?? entries[...]
        let slice = eligible.suffix(count)
        return (try messages(slice), slice.startIndex > eligible.startIndex)
    }

    /// Clients attached only to follow a reply they asked for (`quiet`): they get every
    /// notification, but are neither announced to the others nor listed to them.
    private var quiet: Set<ObjectIdentifier> = []

    func attach(_ client: ClientSession, quiet isQuiet: Bool = false) -> Bool {
        guard !attached.contains(where: { $0 === client }) else { return false }
        attached.append(client)
        if isQuiet { quiet.insert(ObjectIdentifier(client)) }
        return true
    }

    func detach(_ client: ClientSession) -> Bool {
        guard let index = attached.firstIndex(where: { $0 === client }) else { return false }
        attached.remove(at: index)
        quiet.remove(ObjectIdentifier(client))
        return true
    }

    func detachAll() -> [ClientSession] {
        defer { attached = []; quiet = [] }
        return attached
    }

    func isQuiet(_ client: ClientSession) -> Bool { quiet.contains(ObjectIdentifier(client)) }

    /// The attached clients others are told about.
    var present: [ClientSession] { attached.filter { !isQuiet($0) } }

    /// Encodes once, writes the same bytes to every attached client.
    private func broadcast(_ notification: RPCNotification, _ params: [String: JSON], except: ClientSession? = nil) {
        guard !attached.isEmpty else { return }
        var params = params
        params["conversation"] = .string(id)
        let buffer = OutboundBuffer(RPC.notification(notification, params: .object(params)))
        for client in attached where client !== except { client.send(buffer) }
    }

    /// One conversation event, encoded by the type the clients decode it with.
    func broadcast(_ event: ConversationEvent, except: ClientSession? = nil) {
        broadcast(event.kind, event.params, except: except)
    }

    /// `message.delta` or `message.reasoning`, the frame sent for every streamed piece of the
    /// reply's text or thought: written straight into a buffer reused from one piece to the
    /// next (each is written and sent before the next), with no params dictionary.
    func broadcastPiece(_ piece: RPC.StreamedPiece, message: String, content: String) {
        guard !attached.isEmpty else { return }
        deltaFrame.removeAll(keepingCapacity: true)
        RPC.writePiece(piece, conversation: id, message: message, content: content, into: &deltaFrame)
        let buffer = OutboundBuffer(deltaFrame)
        for client in attached { client.send(buffer) }
    }

    /// Only allocated once a reply streams to someone; a delta frame is a few hundred bytes.
    private var deltaFrame: [UInt8] = []
}

/// A stored message of a conversation in memory: held whole (written since its log was read, or
/// read in full), or known by where its record is in the log.
enum StoredEntry {
    /// Boxed: a message is large, and an entry known by place should not hold room for one.
    indirect case held(Message)
    case stored(StoredMessage)

    var id: String {
        switch self {
        case .held(let message): message.id
        case .stored(let place): place.id
        }
    }

    var order: MessageOrder {
        switch self {
        case .held(let message): message.order
        case .stored(let place): place.order
        }
    }

    var sequence: Int { order.sequence }

    var role: Role {
        switch self {
        case .held(let message): message.role
        case .stored(let place): place.role
        }
    }

    var supersededBy: String? {
        get {
            switch self {
            case .held(let message): message.supersededBy
            case .stored(let place): place.supersededBy
            }
        }
        set {
            switch self {
            case .held(var message):
                message.supersededBy = newValue
                self = .held(message)
            case .stored(var place):
                place.supersededBy = newValue
                self = .stored(place)
            }
        }
    }
}
