import ConfabLog
import ConfabProtocol
import DaemonSettings
import EventLoop
import LogStore
import MCP
import ServiceSettings
import Tools
import Upstream

/// Every reply's life, from its turn in a conversation's queue to its announced ending:
/// the one count of streams in flight and the conversations waiting for one, the request
/// built from the conversation's context, retries after a refusal, the text saved as it
/// streams, the durable ending and its announcement, cancel, and what shutdown leaves behind.
///
/// `Broker` owns clients and dispatch; it hands a conversation here when a send is stored
/// (`startNext`), when a client cancels (`cancel`), when a conversation goes (`forget`), and
/// at shutdown (`interruptAll`). Everything here runs on the loop thread.
final class ReplyRunner {
    let loop: Loop
    let upstream: any ReplyUpstream
    /// The broker's settings in force, read at each use (never copied: a reload replaces them
    /// there and says so through `settingsReplaced`).
    let settings: CurrentSettings
    var providers: ProviderTable { settings.providers }
    /// What was learnt of each provider's server (the tool-call turn form it takes, the images
    /// its models refused), until the config is loaded again.
    private(set) var quirks = ProviderQuirks()
    /// For each reply's context budget and tools, looked up by the conversation's profile name.
    var profiles: ProfileTable { settings.profiles }
    /// The configured tools; a conversation offers those its profile lists.
    var tools: ToolTable { settings.tools }
    var limits: BrokerLimits { settings.limits }
    var logger: Logger { settings.logger }
    /// Redacted from every error a model server gives and every tool result.
    var secrets: SecretRedactor { settings.secrets }
    /// Conversations with a reply ready to start, waiting for a free upstream stream.
    private var waitingForStream: [Conversation] = []
    /// Replies started and not yet ended, across conversations.
    private(set) var activeReplies = 0
    private(set) var isStopping = false
    /// Reads of a reply's context from the log that have come back from the thread pool.
    var contextReadsAnswered = 0
    /// The configured MCP servers, started as conversations first offer their tools.
    let mcp: MCPServers
    /// Every kind of tool, asked what a profile offers by a reply and by `tools.list` alike.
    let toolSources: ToolSources
    /// Conversations whose next reply waits for MCP servers to start (or fail to).
    private var waitingForToolSources: Set<String> = []
    /// Conversations whose MCP servers were waited for: their next reply starts with what is ready.
    private var toolSourcesSettled: Set<String> = []

    /// The daemon's own uid: the owner, whose secrets tool calls spend.
    let ownUID: UInt32
    /// Reads the stored files a reply's turns carry; without one, each is sent as a line saying
    /// it could not be read.
    var attachmentReader: (any AttachmentReader)?

    init(loop: Loop, upstream: any ReplyUpstream, settings: CurrentSettings, ownUID: UInt32, mcpLauncher: [String] = []) {
        self.loop = loop
        self.upstream = upstream
        self.settings = settings
        self.ownUID = ownUID
        mcp = MCPServers(loop: loop, launcher: mcpLauncher, settings: settings)
        // The order in which sources are asked: an entry is the first one's that serves it, and
        // the shared name-space (HTTP tools) is named before any other.
        toolSources = ToolSources([HTTPToolSource(settings: settings, upstream: upstream), mcp])
    }

    /// The config was loaded again: what was learnt about the old providers is forgotten, and
    /// a higher `maxStreams` lets waiting replies start now.
    func settingsReplaced() {
        quirks.forgetAll()
        mcp.update()
        admitWaiting()
    }

    /// Starts the next queued reply of a conversation if none is running and a stream is free.
    func startNext(in conversation: Conversation) {
        guard conversation.active == nil, !conversation.isDeleted, !isStopping, conversation.queuedCount > 0 else { return }
        guard activeReplies < limits.maxStreams else {
            if !waitingForStream.contains(where: { $0 === conversation }) { waitingForStream.append(conversation) }
            return
        }
        // The model is told of the tools a reply may call when it starts: MCP servers the
        // conversation offers are started first, and waited for until ready or failed (each
        // bounded by its startup_timeout_seconds); the reply then offers what is ready.
        if toolSourcesSettled.remove(conversation.id) == nil {
            guard !waitingForToolSources.contains(conversation.id) else { return }
            let waiting = toolSources.prepare(profile(of: conversation)?.toolEntries ?? [], settled: { [unowned self] space, status in
                if case .failed(let reason) = status {
                    logger.warning("conversation=\(conversation.id) mcp=\(space) not offered: \(reason)")
                }
            }, then: { [unowned self] in
                waitingForToolSources.remove(conversation.id)
                toolSourcesSettled.insert(conversation.id)
                startNext(in: conversation)
            })
            if waiting {
                waitingForToolSources.insert(conversation.id)
                return
            }
        }
        guard let (replyID, requester) = conversation.takeNextReply() else { return }
        var message = Message(id: replyID, conversation: conversation.id, role: .assistant, content: "", status: .streaming,
                              created: .now(), model: conversation.model, params: conversation.params.isEmpty ? nil : conversation.params)
        var continued: (bytes: Int, usage: Usage?)?
        if conversation.continuing == replyID {
            conversation.continuing = nil
            // The reply leaves the stored messages while it streams, as every reply in flight does,
            // and keeps its id, time and text: what streams now is appended to it.
            guard let stored = conversation.takeForContinuing(replyID) else { return startNext(in: conversation) }
            message = stored
            message.status = .streaming
            message.finishReason = nil
            message.error = nil
            // Kept until the continuation ends: an ending that never reached the upstream's
            // answer (cancelled, failed, interrupted) still carries what earlier requests used.
            message.model = conversation.model
            message.params = conversation.params.isEmpty ? nil : conversation.params
            message.context = nil
            continued = (stored.content.utf8.count, stored.usage)
        }
        let reply = Reply(message: message, request: ChatRequest(model: conversation.model, messages: []), now: loop.now)
        reply.continued = continued
        reply.requestedBy = requester
        conversation.active = reply
        activeReplies += 1
        startTurn(of: reply, in: conversation)
    }

    /// Asks the upstream for the reply's message as it stands (a new reply, a continuation, or
    /// the next turn after tool calls): the request from the context before it, the budget, the
    /// start record, the announcement, then the stream.
    func startTurn(of reply: Reply, in conversation: Conversation) {
        readContext(of: reply, in: conversation) { [unowned self] read in startTurn(of: reply, in: conversation, context: read) }
    }

    /// The turn once its context is read: should that have failed, the reply fails as one whose
    /// start cannot be stored does, once it is announced.
    private func startTurn(of reply: Reply, in conversation: Conversation, context read: Result<[ChatMessage], MessageError>) {
        var message = reply.message
        let continued = reply.continued
        var unreadable: MessageError?
        var context: [ChatMessage] = []
        switch read {
        case .success(let turns): context = turns
        case .failure(let error):
            logger.error("conversation=\(conversation.id) reply=\(message.id) cannot read its context: \(error.message)")
            unreadable = error
        }
        var request = ChatRequest(model: conversation.model, messages: context)
        request.reasoningPassBack = providers[conversation.provider]?.config.reasoningPassBack ?? .toolCalls
        if !imagePolicy(of: conversation).takesImages { request.messages = Self.withoutImages(request.messages) }
        let refusedBefore = quirks.imageRefusals.refused(in: conversation.id, provider: conversation.provider, model: conversation.model)
        if !refusedBefore.isEmpty {
            let takesNone = quirks.imageRefusals.takesNoImages(in: conversation.id, provider: conversation.provider, model: conversation.model)
            let named = ImageRefusals.replacingImages(in: &request.messages, reason: ImageRefusals.refusedReason, only: takesNone ? nil : refusedBefore)
            if named > 0 {
                logger.info("conversation=\(conversation.id) reply=\(message.id) \(named) image\(named == 1 ? "" : "s") sent as a line:"
                    + (takesNone ? " the model refused every request with images" : " the model refused them before"))
            }
        }
        // The reasoning a turn of this chain asked for tools after, for the same provider and model only.
        for index in request.messages.indices where request.messages[index].reasoning == nil {
            guard let first = request.messages[index].toolCalls.first, let replay = reply.reasoningReplays[first.id],
                  replay.provider == conversation.provider, replay.model == request.model else { continue }
            request.messages[index].reasoning = replay
        }
        let provider = providers[conversation.provider]
        // The provider's temperature and max_tokens are defaults beneath the conversation's own.
        request.params = SamplingParameters(temperature: provider?.config.temperature, maxTokens: provider?.config.maxTokens,
                                            reasoningEffort: provider?.config.reasoningEffort)
            .overridden(by: conversation.params)
        // Reasoning settings and extra_body: the profile's over the provider's.
        request.options = (provider?.config.options ?? RequestOptions())
            .overridden(by: conversation.profile.flatMap { profiles[$0]?.options } ?? RequestOptions())
        request.tools = offeredTools(in: conversation).map {
            ToolDeclaration(name: $0.name, description: $0.description, parameters: $0.parameters)
        }
        if continued != nil { request.continuing = message.content }
        request.toolCallTurnContent = quirks.toolCallTurnContent(for: conversation.provider)
        if compactsFirst(reply, in: conversation, request: request) { return }
        reply.refusedToolCallTurnContent = nil
        reply.withdrawnImages = nil
        var tooLarge: MessageError?
        if let contextTokens = contextTokens(of: conversation) {
            let budget = ContextBudget(contextTokens: contextTokens, maxTokens: request.params.maxTokens,
                                       ratio: conversation.contextRatio ?? 1)
            switch budget.fit(request.messages, continuing: request.continuing, sendsReasoning: request.reasoningPassBack != .none) {
            case .success(let fitted):
                request.messages = fitted.messages
                message.context = fitted.info
                noteCompaction(in: &message.context, of: reply, in: conversation)
            case .failure(.tooLarge(let needed, let available)):
                tooLarge = MessageError(code: .contextTooLarge, message: "the system prompt, the newest message"
                    + (continued == nil ? "" : ", the reply so far") + " and \(budget.maxTokens) tokens for the reply need about \(needed) tokens;"
                    + " this conversation's context_tokens is \(available)")
            }
        }
        let imagesNamed = Self.limitingImages(&request.messages)
        if imagesNamed > 0 {
            logger.notice("conversation=\(conversation.id) reply=\(message.id) \(imagesNamed) older image\(imagesNamed == 1 ? "" : "s") sent as a line: "
                + "over \(Self.maxImagesPerRequest) images or \(Self.maxImageBytesPerRequest >> 20) MiB of images in one request")
        }
        let textsNamed = Self.limitingTextFiles(&request.messages)
        if textsNamed > 0 {
            logger.notice("conversation=\(conversation.id) reply=\(message.id) \(textsNamed) older text file\(textsNamed == 1 ? "" : "s") sent as a line: "
                + "over \(Self.maxTextFilesPerRequest) text files or \(Self.maxTextBytesPerRequest >> 20) MiB of text files in one request")
        }
        reply.message = message
        reply.request = request
        // A continuation is announced as such: clients already show its text and append to it.
        let announcement: ConversationEvent = continued == nil ? .messageCreated(message) : .messageContinued(message)
        reply.isAnnounced = true
        do {
            try conversation.log.write([.replyStarted(message)])
        } catch {
            logger.error("conversation=\(conversation.id) cannot store reply start: \(error)")
            conversation.broadcast(announcement)
            finish(in: conversation, status: .failed, error: MessageError(code: .storage, message: "cannot write the log: \(error)"))
            return
        }
        conversation.broadcast(announcement)
        if let unreadable {
            finish(in: conversation, status: .failed, error: unreadable)
            return
        }
        if let tooLarge {
            // Refused before any request: the upstream would only cut the context itself or fail.
            logger.warning("conversation=\(conversation.id) reply=\(message.id) context too large: \(tooLarge.message)")
            finish(in: conversation, status: .failed, error: tooLarge)
            return
        }
        logger.info("conversation=\(conversation.id) reply=\(message.id) \(continued == nil ? "started" : "continued") provider=\(conversation.provider) model=\(conversation.model) context=\(request.messages.count)")
        // The files of the turns that fit are read off the loop, then the request is made.
        readAttachments(of: reply, in: conversation) { [unowned self] in askUpstream(for: reply, in: conversation) }
    }

    /// The tools a conversation's profile offers, as configured now (a reload applies to the
    /// next turn): its HTTP tools, and the tools of its MCP servers that are ready, under their
    /// model-facing names (`SERVER__TOOL`).
    func offeredTools(in conversation: Conversation) -> [OfferedTool] {
        toolSources.offered(by: profile(of: conversation))
    }

    private func profile(of conversation: Conversation) -> Profile? {
        conversation.profile.flatMap { profiles[$0] }
    }

    /// A profile's `context_tokens` over its provider's; nil when neither sets one.
    func contextTokens(of conversation: Conversation) -> Int? {
        conversation.profile.flatMap { profiles[$0]?.contextTokens } ?? providers[conversation.provider]?.config.contextTokens
    }

    /// `generation.cancel`: stops the reply in flight, if it can still be stopped and is of
    /// `chain` when one is named (a client stopping the reply it asked for must not stop the
    /// next one instead; any message of a chain names it: `m2` stops `m2` and the turns after its
    /// tool calls). Returns the id of the message it stopped at.
    func cancel(in conversation: Conversation, chain: Int?, by client: ClientSession) -> String? {
        guard let reply = conversation.active, !reply.isFinishing else { return nil }
        if let chain, chain != reply.chain { return nil }
        announceStart(of: reply, in: conversation)
        conversation.broadcast(.generationCancelled(message: reply.message.id, by: client.info))
        let id = reply.message.id
        logger.info("conversation=\(conversation.id) reply=\(id) cancelled")
        if reply.isRunningTools {
            closeChain(of: reply, in: conversation, status: .cancelled)
        } else {
            // What streamed was paid for: its usage is estimated, as a failed reply's is.
            reply.message.usage = Usage.sum(reply.continued?.usage, estimatedUsage(of: reply))
            finish(in: conversation, status: .cancelled, error: nil)
        }
        return id
    }

    /// A deleted conversation: its reply stops without an ending, its queue goes, its stream is free.
    func forget(_ conversation: Conversation) {
        if let reply = conversation.active { release(reply, from: conversation) }
        abandonCompaction(in: conversation)
        waitingForStream.removeAll { $0 === conversation }
        quirks.forget(conversation: conversation.id)
        waitingForToolSources.remove(conversation.id)
        toolSourcesSettled.remove(conversation.id)
        conversation.dropQueue()
        admitWaiting()
    }

    private func askUpstream(for reply: Reply, in conversation: Conversation) {
        // Looked up for every attempt: a reload between two takes effect at the next one.
        guard let provider = providers[conversation.provider] else {
            logger.warning("conversation=\(conversation.id) reply=\(reply.message.id) provider \(conversation.provider) is not configured")
            finish(in: conversation, status: .failed, error: MessageError(code: .notConfigured,
                message: "no provider \"\(conversation.provider)\" in the config: this conversation's replies come from it"))
            return
        }
        reply.attempts += 1
        // An attempt refused before it answered leaves no item to send back: this one's own.
        reply.reasoningItems = []
        if reply.attempts == 1 {
            for notice in provider.api.notices(for: reply.request) {
                logger.notice("conversation=\(conversation.id) reply=\(reply.message.id) \(notice)")
            }
        }
        // The handler holds the reply (never weakly: a weak reference gives an object a side
        // table, which makes every retain of it slower, and this runs for every token) until
        // the stream drops it, when it ends or is cancelled: nothing to look up, nothing stale.
        reply.stream = upstream.startReply(reply.request, from: provider) { [unowned self] event in
            switch event {
            case .text(let text): received(text, for: reply, in: conversation)
            case .reasoning(let piece): receivedReasoning(piece, for: reply, in: conversation)
            case .reasoningItem(let item): reply.reasoningItems.append(item)
            case .finished(let finishReason, let usage, let serverError, let retryAfter, let toolCalls):
                if serverError == nil, let first = toolCalls.first, let stream = reply.stream as? ReplyStream, !stream.reasoningItems.isEmpty {
                    reply.reasoningReplays[first.id] = ReasoningReplay(api: provider.api.name, provider: provider.name, model: reply.request.model,
                                                                       text: "", items: stream.reasoningItems)
                }
                reply.stream = nil
                // A server's error body may quote the key it was sent (`Incorrect API key provided: sk-…`).
                let outcome = AttemptOutcome(error: serverError.map(secrets.redacting), retryAfterSeconds: retryAfter, finishReason: finishReason,
                                             usage: usage, toolCalls: toolCalls,
                                             streamedBytes: reply.message.content.utf8.count - (reply.continued?.bytes ?? 0),
                                             reasoned: !(reply.message.reasoning?.text.isEmpty ?? true) || !reply.reasoningItems.isEmpty)
                carryOut(policy(for: reply, provider: provider, in: conversation).decide(outcome), of: reply, from: provider, in: conversation)
            }
        }
    }

    /// The rules the reply's attempt that just ended is judged by: the limits in force, the
    /// reply's state, the request it sent, and what was learnt of its provider.
    private func policy(for reply: Reply, provider: Provider, in conversation: Conversation) -> AttemptPolicy {
        AttemptPolicy(maxRetries: provider.config.maxRetries, maxToolRounds: limits.maxToolRounds, isStopping: isStopping,
                      attempts: reply.attempts, toolRounds: reply.toolRounds,
                      refusedToolCallTurnContent: reply.refusedToolCallTurnContent, withdrawnImages: reply.withdrawnImages,
                      api: provider.api, sentToolCallTurnContent: reply.request.toolCallTurnContent,
                      hasTextlessToolCallTurn: reply.request.hasTextlessToolCallTurn,
                      carriesImages: reply.request.messages.contains(where: { !$0.images.isEmpty }),
                      maxTokens: reply.request.params.maxTokens, promptEstimate: ContextBudget.rawEstimate(reply.request.chatMessages),
                      provider: provider.name, profile: conversation.profile, contextTokens: contextTokens(of: conversation),
                      learnedToolCallTurnContent: quirks.toolCallTurnForms[provider.name])
    }

    /// Does what the policy decided: adjusts the request and tries again after the wait, or
    /// learns what the turn taught of the provider and ends the turn.
    private func carryOut(_ decision: AttemptDecision, of reply: Reply, from provider: Provider, in conversation: Conversation) {
        switch decision {
        case .retry(let announced, let retryAfter, let adjustment):
            switch adjustment {
            case .toolCallTurnContent(let refused):
                reply.refusedToolCallTurnContent = refused
                reply.request.toolCallTurnContent = refused.other
                logger.notice("conversation=\(conversation.id) reply=\(reply.message.id) provider=\(provider.name) refused a tool-call turn sent"
                    + " \(refused) (\(announced.logText)): sending it \(refused.other)")
            case .imagesAsLines:
                let withdrawn = ImageRefusals.imageDigests(in: reply.request.messages)
                reply.withdrawnImages = withdrawn
                ImageRefusals.replacingImages(in: &reply.request.messages, reason: ImageRefusals.refusedReason)
                logger.notice("conversation=\(conversation.id) reply=\(reply.message.id) provider=\(provider.name) model=\(reply.request.model)"
                    + " refused a request with \(withdrawn.count) image\(withdrawn.count == 1 ? "" : "s") (\(announced.logText)): sending it with each as a line naming it")
            case nil: break
            }
            scheduleRetry(of: reply, in: conversation, after: announced, retryAfterSeconds: retryAfter)
        case .finish(let ending):
            reply.message.finishReason = ending.finishReason
            for lesson in ending.lessons {
                let learnt = quirks.learn(lesson, conversation: conversation.id, provider: provider.name, model: reply.request.model,
                                          sentImages: ImageRefusals.imageDigests(in: reply.request.messages))
                if let learnt { logger.notice(learnt) }
            }
            if let calls = ending.toolCalls { reply.message.toolCalls = calls }
            if let ratio = ending.contextRatio { conversation.contextRatio = ratio }
            reply.message.usage = Usage.sum(reply.continued?.usage, ending.usage ?? estimatedUsage(of: reply))
            finish(in: conversation, status: ending.status, error: ending.error)
        }
    }

    /// A reply that got text but no usage from the upstream (llama.cpp's server sends none even
    /// when asked) gets an estimate, marked as such, so token totals still add up.
    private func estimatedUsage(of reply: Reply) -> Usage? {
        // A continuation's own completion is the text after what it started with.
        let completion = reply.continued.map { String(decoding: reply.message.content.utf8.dropFirst($0.bytes), as: UTF8.self) }
            ?? reply.message.content
        let reasoning = reply.message.reasoning?.text ?? ""
        guard !completion.isEmpty || reply.message.toolCalls != nil || !reasoning.isEmpty else { return nil }
        var usage = Usage.estimate(prompt: [], completion: completion + (reply.message.toolCalls ?? []).reduce("") { $0 + $1.name + $1.arguments },
                                   reasoning: reasoning)
        // The prompt as the context budget counts it: images included.
        usage.promptTokens = ContextBudget.rawEstimate(reply.request.chatMessages)
        usage.totalTokens = usage.promptTokens + usage.completionTokens
        return usage
    }

    /// How long to wait before trying again after failed attempt `attempt` (from 1): the
    /// upstream's `Retry-After` in seconds, capped at 300 s (a negative one is no wait); else
    /// `base` doubling with each attempt, capped at 30 s.
    static func retryDelayMilliseconds(attempt: Int, retryAfterSeconds: Int?, base: UInt64) -> UInt64 {
        if let seconds = retryAfterSeconds { return UInt64(max(0, min(seconds, 300))) * 1000 }
        let cap: UInt64 = 30_000
        let doublings = max(0, attempt - 1)
        // Past the cap long before the shift could overflow.
        guard doublings < 32, base <= cap else { return cap }
        return min(base << UInt64(doublings), cap)
    }

    private func scheduleRetry(of reply: Reply, in conversation: Conversation, after error: MessageError, retryAfterSeconds: Int?) {
        let delay = Self.retryDelayMilliseconds(attempt: reply.attempts, retryAfterSeconds: retryAfterSeconds,
                                                base: limits.retryBaseMilliseconds)
        logger.warning("conversation=\(conversation.id) reply=\(reply.message.id) attempt \(reply.attempts) failed (\(error.logText)): retrying in \(delay) ms")
        conversation.broadcast(.messageRetrying(message: reply.message.id, attempt: reply.attempts, delayMilliseconds: Int(delay), error: error))
        let timer = Timer(loop: loop)
        reply.retryTimer = timer
        timer.start(after: delay) { [unowned self] in
            timer.close()
            guard !reply.isOver, !reply.isFinishing else { return }
            reply.retryTimer = nil
            askUpstream(for: reply, in: conversation)
        }
    }

    private func received(_ text: String, for reply: Reply, in conversation: Conversation) {
        if reply.message.reasoning != nil, reply.message.reasoning?.ended == nil { reply.message.reasoning?.ended = .now() }
        reply.message.content += text
        conversation.broadcastPiece(.text, message: reply.message.id, content: text)
        reply.unsavedText += text
        saveTextWhenDue(of: reply, in: conversation)
    }

    /// A piece of the model's thought: appended to the reply (a client attaching now reads it
    /// in `pending`), fanned out to every attached client as `message.reasoning`, and saved with
    /// the text. The first piece starts the reasoning's clock; a piece after the answer began
    /// (interleaved thinking, or a continued reply that thinks again) starts it again.
    private func receivedReasoning(_ piece: String, for reply: Reply, in conversation: Conversation) {
        if reply.message.reasoning == nil {
            reply.message.reasoning = Reasoning(text: piece, started: .now())
        } else {
            if reply.message.reasoning?.ended != nil { reply.message.reasoning?.resume(at: .now()) }
            reply.message.reasoning?.text += piece
        }
        conversation.broadcastPiece(.thought, message: reply.message.id, content: piece)
        reply.unsavedReasoning += piece
        saveTextWhenDue(of: reply, in: conversation)
    }

    /// Saves what the reply streamed since its last save, once `replySaveIntervalMilliseconds`
    /// have passed since then.
    private func saveTextWhenDue(of reply: Reply, in conversation: Conversation) {
        let now = loop.now
        guard now - reply.lastSave >= limits.replySaveIntervalMilliseconds else { return }
        saveText(of: reply, in: conversation)
        reply.lastSave = now
    }

    /// Puts a streaming reply's recent text (and reasoning) in its log (page cache only: it
    /// survives a daemon crash, not a power cut, and costs one write(2)).
    private func saveText(of reply: Reply, in conversation: Conversation) {
        guard !reply.unsavedText.isEmpty || !reply.unsavedReasoning.isEmpty else { return }
        var records: [LogRecord] = []
        if !reply.unsavedReasoning.isEmpty, let started = reply.message.reasoning?.started {
            records.append(.replyReasoning(message: reply.message.id, content: reply.unsavedReasoning, started: started))
        }
        if !reply.unsavedText.isEmpty { records.append(.replyText(message: reply.message.id, content: reply.unsavedText)) }
        do {
            try conversation.log.write(records)
            reply.unsavedText = ""
            reply.unsavedReasoning = ""
        } catch {
            logger.warning("conversation=\(conversation.id) reply=\(reply.message.id) cannot save text: \(error)")
        }
    }

    /// Ends the reply in flight: records it durably, then announces it, then moves on.
    func finish(in conversation: Conversation, status: MessageStatus, error: MessageError?) {
        guard let reply = conversation.active, !reply.isFinishing else { return }
        announceStart(of: reply, in: conversation)
        reply.stop()
        // The reply itself stays `streaming` until its ending is durable: a client that
        // attaches during the sync gets it as `pending` and then the ending, as it would earlier.
        closeReasoning(of: reply, in: conversation)
        var ending = reply.message
        Self.keepContinuable(&ending, reply, status: status)
        ending.status = status
        ending.error = error
        reply.ending = ending
        conversation.log.append([.replyFinished(ending)]) { [unowned self] storeError in
            // Deleted meanwhile, or already settled by shutdown: nothing left to announce.
            guard !conversation.isDeleted, !reply.isOver else { return }
            let final = announce(ending, of: conversation, storeError: storeError)
            // A turn that asked for tools is not the end of the reply: the calls and the next turn follow.
            if final.status == .complete, let calls = final.toolCalls, !calls.isEmpty, !isStopping {
                reply.ending = nil
                runTools(calls, of: reply, in: conversation)
                return
            }
            endReply(reply, in: conversation)
        }
    }

    /// A turn that ends before it was announced (cancelled or stopped while its context was read,
    /// or while a summary was written first) is announced now, as it would have been: no client
    /// hears of a message's ending before its start, nor of a continued reply's new ending
    /// without `message.continued`.
    private func announceStart(of reply: Reply, in conversation: Conversation) {
        guard !reply.isAnnounced else { return }
        reply.isAnnounced = true
        conversation.broadcast(reply.continued == nil ? .messageCreated(reply.message) : .messageContinued(reply.message))
    }

    /// The reply's chain is over: its stream is free, and what waits goes ahead.
    func endReply(_ reply: Reply, in conversation: Conversation) {
        release(reply, from: conversation)
        startNext(in: conversation)
        admitWaiting()
    }

    /// The one way a reply leaves: it stops, its conversation no longer has it, its stream is free.
    func release(_ reply: Reply, from conversation: Conversation) {
        reply.leave(conversation)
        activeReplies -= 1
    }

    /// Announces how a message of the reply in flight ended, once its final record is durable or
    /// could not be made so (then it is a `storage` failure: only what is stored is called completed).
    @discardableResult
    func announce(_ ending: Message, of conversation: Conversation, storeError: StoreError?) -> Message {
        var final = ending
        if let storeError {
            logger.error("conversation=\(conversation.id) reply=\(final.id) cannot store reply: \(storeError)")
            final.status = .failed
            final.error = MessageError(code: .storage, message: "cannot write the log: \(storeError)")
        }
        conversation.insert(final)
        if final.status == .failed {
            // The server's whole text is kept here and in the message: clients say only its first line.
            logger.warning("conversation=\(conversation.id) reply=\(final.id) failed: \(final.error?.logText ?? "")")
            conversation.broadcast(.messageFailed(final, error: final.error))
        } else {
            logger.info("conversation=\(conversation.id) reply=\(final.id) \(final.status.rawValue) chars=\(final.content.count)"
                + (final.toolCalls.map { " tool_calls=\($0.count)" } ?? ""))
            conversation.broadcast(.messageCompleted(final))
        }
        return final
    }

    /// Lets conversations that waited for a free stream start, oldest first.
    func admitWaiting() {
        while activeReplies < limits.maxStreams, !waitingForStream.isEmpty {
            startNext(in: waitingForStream.removeFirst())
        }
    }

    /// Shutdown: no reply starts again; queues are dropped (their sends are stored, and are
    /// resumed at the next start); a reply whose ending is being synced is announced now; every
    /// other reply in flight is stored and announced as `interrupted`. Blocking writes are fine here.
    func interruptAll(in conversations: some Sequence<Conversation>) {
        isStopping = true
        waitingForStream = []
        for conversation in conversations {
            conversation.dropQueue()
            if let reply = conversation.active, let ending = reply.ending {
                // Its final record is written and its sync is on the thread pool: sync here
                // and announce now, before `server.stopping`, not after the clients are gone.
                let storeError = conversation.log.syncNow()
                announceStoredCalls(of: reply, in: conversation, storeError: storeError)
                announce(ending, of: conversation, storeError: storeError)
                release(reply, from: conversation)
                continue
            }
            if let reply = conversation.active, reply.isRunningTools {
                interruptCalls(of: reply, in: conversation)
                release(reply, from: conversation)
                continue
            }
            guard let reply = conversation.active else { continue }
            announceStart(of: reply, in: conversation)
            release(reply, from: conversation)
            closeReasoning(of: reply, in: conversation)
            reply.message.usage = Usage.sum(reply.continued?.usage, estimatedUsage(of: reply))
            reply.message.status = .interrupted
            Self.keepContinuable(&reply.message, reply, status: .interrupted)
            do {
                try conversation.log.write([.replyFinished(reply.message)])
                if let error = conversation.log.syncNow() { throw error }
            } catch {
                // Announce only what is stored: an unsaved ending is a storage failure.
                logger.error("conversation=\(conversation.id) reply=\(reply.message.id) cannot save interrupted reply: \(error)")
                reply.message.status = .failed
                reply.message.error = MessageError(code: .storage, message: "cannot write the log: \(error)")
            }
            conversation.insert(reply.message)
            if let error = reply.message.error {
                conversation.broadcast(.messageFailed(reply.message, error: error))
                continue
            }
            conversation.broadcast(.messageCompleted(reply.message))
            logger.notice("conversation=\(conversation.id) reply=\(reply.message.id) interrupted by shutdown chars=\(reply.message.content.count)")
        }
    }

    /// The reply's turn is over: its thought has ended (if it had not at the first text), the
    /// encrypted blocks are counted, and what the server wants back is kept with where it came
    /// from (the provider and model of this request: only they are ever sent it).
    private func closeReasoning(of reply: Reply, in conversation: Conversation) {
        let items = reply.reasoningItems
        guard reply.message.reasoning != nil || !items.isEmpty else { return }
        let now = Timestamp.now()
        var reasoning = reply.message.reasoning ?? Reasoning(text: "", started: now)
        if reasoning.ended == nil { reasoning.ended = now }
        let redacted = items.filter { $0["type"]?.string == "redacted_thinking" }.count
        if redacted > 0 { reasoning.redactedBlocks = redacted }
        reply.message.reasoning = reasoning
        let api = providers[conversation.provider]?.api.name ?? ProviderAPI.chat.name
        // A continuation keeps the items of the part it extends, and adds its own.
        let kept = reply.message.reasoningSource.flatMap { $0.provider == conversation.provider && $0.model == reply.request.model ? $0.items : nil } ?? []
        reply.message.reasoningSource = ReasoningSource(api: api, provider: conversation.provider, model: reply.request.model,
                                                        items: (reply.continued == nil ? [] : kept) + items)
    }

    /// A continuation that did not finish (cancelled, failed, interrupted) is still a reply cut
    /// off for length: it can be continued again.
    private static func keepContinuable(_ ending: inout Message, _ reply: Reply, status: MessageStatus) {
        guard reply.continued != nil, status != .complete, ending.finishReason == nil else { return }
        ending.finishReason = "length"
    }
}

extension MessageError {
    /// As the daemon's log writes a reply's error: the protocol's code, the HTTP status when
    /// there is one, and the message (the server's own words), so one grep finds them all.
    var logText: String {
        "\(code.rawValue)" + (status.map { " status=\($0)" } ?? "") + ": " + message
    }
}
