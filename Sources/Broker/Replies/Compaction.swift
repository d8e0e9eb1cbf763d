import ConfabProtocol
import DaemonSettings
import LogStore
import ServiceSettings
import Upstream

/// Compaction: a summary, written by a model, stands for the older messages in what the model is
/// sent, while the log, the history, export and search keep every message. It is a record
/// (`compaction`) naming the range it covers, ended by another (`uncompaction`); nothing is
/// rewritten. One summary is written at a time per conversation, as a job every attached client
/// follows (`compaction.started`, `.delta`, `.completed`, `.failed`); a job that fails or is
/// cancelled stores nothing.
final class CompactionJob {
    /// The range it covers, and the messages of it that were current when it started: should any
    /// of them be replaced before it ends, its summary would describe another conversation.
    let first: String
    let last: String
    let covered: [String]
    let model: String
    let focus: String?
    let automatic: Bool
    var text = ""
    /// While the messages it covers are read from the log (on the thread pool), before anything
    /// is asked: it can be cancelled, and nothing is on its way to the log.
    var isReading = false
    var stream: (any UpstreamCall)?
    /// Where it ends: `Result` of a stored summary, or why there is none.
    let done: (Result<Compaction, CompactionFailure>) -> Void
    private(set) var isOver = false

    init(first: String, last: String, covered: [String], model: String, focus: String?, automatic: Bool,
         done: @escaping (Result<Compaction, CompactionFailure>) -> Void) {
        self.first = first
        self.last = last
        self.covered = covered
        self.model = model
        self.focus = focus
        self.automatic = automatic
        self.done = done
    }

    /// Stops the request; its handler hears nothing more.
    func stop() {
        isOver = true
        stream?.cancel()
        stream = nil
    }
}

/// Why no summary was stored.
enum CompactionFailure: Error {
    case failed(MessageError)
    case cancelled(by: ClientInfo?)
    /// The conversation was deleted meanwhile.
    case deleted
    /// confabd is stopping; `storing` when the summary was written and its record on its way
    /// to the log, which may then hold it after all.
    case stopping(storing: Bool)

    var reason: String {
        switch self {
        case .failed(let error): error.logText
        case .cancelled: "the summary was cancelled"
        case .deleted: "the conversation was deleted"
        case .stopping: "confabd is shutting down"
        }
    }
}

extension Compaction {
    /// confab's own summary prompt; a profile's `compact_prompt` replaces it. The focus hint
    /// goes after either.
    static let defaultPrompt = """
        Summarise the conversation above so that it can go on from your summary alone: the messages \
        it covers will not be sent again. Keep every decision made, every fact established (names, \
        numbers, paths, code that matters) and every question still open. Be brief. Write the summary \
        only, with no preamble.
        """

    /// How the summary is sent to the model: a user turn of its own, before the messages after
    /// the range (joined to the first of them when that is a user turn, as any two user turns
    /// in a row are).
    var contextText: String { "Summary of the earlier conversation (\(first)…\(last)):\n\n\(summary)" }

    /// `m1…m40`, as a reply's `context.summarised` names it.
    var rangeName: String { "\(first)…\(last)" }
}

extension Conversation {
    /// The messages a new summary would cover: the current ones before `limit` (all when nil),
    /// ending where the next current message is a user message or nothing follows, so a tool
    /// call and its result are never on two sides of it. A summary in force is folded in: the
    /// new one starts where it started. Nil when nothing lies past the summary in force.
    func compactionRange(before limit: MessageOrder? = nil) -> (first: String, last: String, covered: [StoredEntry])? {
        let current = self.current
        var candidates = current.filter { limit == nil || $0.order < limit! }
        while let last = candidates.last {
            let next = current.first { $0.order > last.order }
            if next == nil || next?.role == .user { break }
            candidates.removeLast()
        }
        guard let last = candidates.last, let first = candidates.first else { return nil }
        if let compaction, compaction.covers(last.id) { return nil }
        return (compaction?.first ?? first.id, last.id, candidates)
    }

    /// Whether a summary is in force that covers `id`.
    func compactionCovers(_ id: String) -> Bool { compaction?.covers(id) ?? false }
}

extension ReplyRunner {
    /// The model a conversation's summaries are written by: its profile's `compact_model`, else its own.
    func compactionModel(of conversation: Conversation) -> String {
        conversation.profile.flatMap { profiles[$0]?.compaction.model } ?? conversation.model
    }

    /// What a summary of the range ending at `last` is asked with: the context a reply just after
    /// it would be sent (a summary in force included).
    func compactionPlan(in conversation: Conversation, last: String) -> (plan: ContextPlan, before: String) {
        let lastOrder = MessageID.order(of: last) ?? MessageOrder(sequence: 0)
        let before = MessageID.make(lastOrder.sequence + 1)
        return (conversation.contextPlan(before: before), before)
    }

    /// The summary request: `context` (the turns up to the end of the range), then the summary
    /// prompt as a user turn.
    func compactionRequest(in conversation: Conversation, context: [ChatMessage], focus: String?) -> ChatRequest {
        var context = context
        // Files are named, not sent: the summary is of what was said.
        for index in context.indices {
            for file in context[index].attachments.indices {
                context[index].attachments[file].content = .line("[file \(context[index].attachments[file].name)]")
            }
        }
        var prompt = conversation.profile.flatMap { profiles[$0]?.compaction.prompt } ?? Compaction.defaultPrompt
        if let focus, !focus.isEmpty { prompt += "\n\nAbove all, keep what concerns: \(focus)" }
        if let lastTurn = context.last, lastTurn.role == .user, lastTurn.toolCalls.isEmpty {
            context[context.count - 1] = ChatMessage(role: .user, content: lastTurn.content + "\n\n" + prompt, attachments: lastTurn.attachments)
        } else {
            context.append(ChatMessage(role: .user, content: prompt))
        }
        var request = ChatRequest(model: compactionModel(of: conversation), messages: context)
        let provider = providers[conversation.provider]
        request.reasoningPassBack = provider?.config.reasoningPassBack ?? .toolCalls
        request.params = SamplingParameters(temperature: provider?.config.temperature, maxTokens: provider?.config.maxTokens,
                                            reasoningEffort: provider?.config.reasoningEffort)
            .overridden(by: conversation.params)
        request.options = (provider?.config.options ?? RequestOptions())
            .overridden(by: conversation.profile.flatMap { profiles[$0]?.options } ?? RequestOptions())
        request.toolCallTurnContent = .empty
        return request
    }

    /// Writes a summary of `range` for the conversation, as a job every attached client follows,
    /// and stores it; `done` hears how it ended (nothing is stored unless it succeeded).
    func startCompaction(in conversation: Conversation, range: (first: String, last: String, covered: [StoredEntry]), focus: String?,
                         automatic: Bool, by client: ClientInfo?, done: @escaping (Result<Compaction, CompactionFailure>) -> Void) {
        let model = compactionModel(of: conversation)
        let job = CompactionJob(first: range.first, last: range.last, covered: range.covered.map(\.id), model: model, focus: focus,
                                automatic: automatic, done: done)
        conversation.compacting = job
        conversation.broadcast(.compactionStarted(by: client, automatic: automatic))
        logger.info("conversation=\(conversation.id) compaction of \(range.first)…\(range.last) started" + (automatic ? " (compact_at)" : "")
            + " model=\(model)")
        guard let provider = providers[conversation.provider] else {
            return endCompaction(job, in: conversation, .failure(.failed(MessageError(code: .notConfigured,
                message: "no provider \"\(conversation.provider)\" in the config: this conversation's replies come from it"))))
        }
        // The messages it covers are read on the thread pool: a long conversation's would stall
        // every other client (as a reply's context is read, `readContext`).
        let (plan, before) = compactionPlan(in: conversation, last: range.last)
        job.isReading = true
        conversation.log.readMessages(plan.stored, on: loop) { [unowned self] result in
            job.isReading = false
            guard !job.isOver, conversation.compacting === job else { return }
            switch result {
            case .success(let read):
                let context = conversation.context(plan, messages: plan.messages(read: read), before: before)
                askForSummary(job, compactionRequest(in: conversation, context: context, focus: focus), from: provider, in: conversation)
            case .failure(let error):
                // The log could not be read back: nothing is asked, nothing stored.
                endCompaction(job, in: conversation, .failure(.failed(MessageError(code: .storage,
                    message: "storage failed: cannot read the conversation's log: \(error)"))))
            }
        }
    }

    /// The summary request sent, its text streamed to the clients, and the summary stored.
    private func askForSummary(_ job: CompactionJob, _ request: ChatRequest, from provider: Provider, in conversation: Conversation) {
        var request = request
        let focus = job.focus, automatic = job.automatic
        if !imagePolicy(of: conversation).takesImages { request.messages = Self.withoutImages(request.messages) }
        if let contextTokens = contextTokens(of: conversation) {
            let budget = ContextBudget(contextTokens: contextTokens, maxTokens: request.params.maxTokens, ratio: conversation.contextRatio ?? 1)
            switch budget.fit(request.messages, sendsReasoning: request.reasoningPassBack != .none) {
            case .success(let fitted): request.messages = fitted.messages
            case .failure(.tooLarge(let needed, let available)):
                return endCompaction(job, in: conversation, .failure(.failed(MessageError(code: .contextTooLarge,
                    message: "the summary request needs about \(needed) tokens; this conversation's context_tokens is \(available)"))))
            }
        }
        job.stream = upstream.startReply(request, from: provider) { [unowned self] event in
            guard !job.isOver else { return }
            switch event {
            case .text(let text):
                job.text += text
                conversation.broadcast(.compactionDelta(content: text))
            case .reasoning, .reasoningItem: break
            case .finished(_, let usage, let serverError, _, _):
                job.stream = nil
                if let error = serverError.map(secrets.redacting) {
                    return endCompaction(job, in: conversation, .failure(.failed(error)))
                }
                let summary = job.text.trimmingWhitespace
                guard !summary.isEmpty else {
                    return endCompaction(job, in: conversation, .failure(.failed(MessageError(code: .upstreamProtocol,
                        message: "the model wrote no summary"))))
                }
                let used = usage ?? Usage.estimate(prompt: request.messages.map(\.estimatedText), completion: job.text)
                store(Compaction(first: job.first, last: job.last, summary: summary, model: job.model, provider: conversation.provider,
                                 usage: used, focus: focus, automatic: automatic), of: job, in: conversation)
            }
        }
    }

    /// `generation.cancel` while a summary is written: it stops, and nothing is stored.
    func cancelCompaction(in conversation: Conversation, by client: ClientInfo?) -> Bool {
        guard let job = conversation.compacting, !job.isOver, job.stream != nil || job.isReading else { return false }
        endCompaction(job, in: conversation, .failure(.cancelled(by: client)))
        return true
    }

    /// The conversation is deleted: the summary stops, and whoever asked for it is answered.
    func abandonCompaction(in conversation: Conversation) {
        guard let job = conversation.compacting else { return }
        conversation.compacting = nil
        job.stop()
        job.done(.failure(.deleted))
    }

    /// confabd stops: every summary still being written stops, and whoever asked for it is
    /// answered now, before `server.stopping` goes out and the clients are closed. Called after
    /// the replies are interrupted, so an automatic summary's reply hears nothing more.
    func abandonCompactions(in conversations: some Sequence<Conversation>) {
        for conversation in conversations {
            guard let job = conversation.compacting, !job.isOver else { continue }
            endCompaction(job, in: conversation, .failure(.stopping(storing: job.stream == nil && !job.isReading)))
        }
    }

    /// Stores the summary if the messages it covers are still the conversation's.
    private func store(_ compaction: Compaction, of job: CompactionJob, in conversation: Conversation) {
        let replaced = job.covered.filter { id in conversation.entries.first { $0.id == id }?.supersededBy != nil }
        guard replaced.isEmpty else {
            return endCompaction(job, in: conversation, .failure(.failed(MessageError(code: .storage,
                message: "\(replaced[0]) was replaced while its summary was written: nothing was stored"))))
        }
        conversation.log.append([.compaction(compaction)]) { [unowned self] error in
            guard !job.isOver else { return }
            if let error {
                logger.error("conversation=\(conversation.id) cannot store compaction: \(error)")
                return endCompaction(job, in: conversation, .failure(.failed(MessageError(code: .storage,
                    message: "cannot write the log: \(error)"))))
            }
            var stored = compaction
            stored.created = .now()
            conversation.compaction = stored
            endCompaction(job, in: conversation, .success(stored))
        }
    }

    /// The job is over: clients are told, and whoever waited for it hears.
    private func endCompaction(_ job: CompactionJob, in conversation: Conversation, _ result: Result<Compaction, CompactionFailure>) {
        job.stop()
        if conversation.compacting === job { conversation.compacting = nil }
        guard !conversation.isDeleted else { return }
        switch result {
        case .success(let compaction):
            logger.info("conversation=\(conversation.id) compaction of \(compaction.rangeName) stored tokens=\(compaction.tokens)")
            conversation.broadcast(.compactionCompleted(compaction))
        case .failure(.cancelled(let by)):
            logger.info("conversation=\(conversation.id) compaction cancelled")
            conversation.broadcast(.compactionFailed(error: nil, cancelledBy: by))
        case .failure(.failed(let error)):
            logger.warning("conversation=\(conversation.id) compaction failed: \(error.logText)")
            conversation.broadcast(.compactionFailed(error: error, cancelledBy: nil))
        case .failure(.deleted):
            break
        case .failure(.stopping):
            // Every client hears `server.stopping` next.
            logger.info("conversation=\(conversation.id) compaction of \(job.first)…\(job.last) stopped: confabd is shutting down")
        }
        job.done(result)
    }

    /// Before a new reply whose request would pass its profile's `compact_at`: a summary is
    /// written first and the reply waits for it (true). Its outcome is kept on the reply, which
    /// then starts again: with the summary, or trimmed as without one, saying why.
    func compactsFirst(_ reply: Reply, in conversation: Conversation, request: ChatRequest) -> Bool {
        guard reply.continued == nil, reply.toolRounds == 0, !reply.compactionTried, conversation.compacting == nil,
              let at = conversation.profile.flatMap({ profiles[$0]?.compaction.at }), let contextTokens = contextTokens(of: conversation)
        else { return false }
        let budget = ContextBudget(contextTokens: contextTokens, maxTokens: request.params.maxTokens, ratio: conversation.contextRatio ?? 1)
        let estimated = budget.estimate(request.messages, sendsReasoning: request.reasoningPassBack != .none)
        guard Double(estimated) > at * Double(contextTokens),
              let question = conversation.current.last(where: { $0.role == .user && $0.order < reply.message.order }),
              let range = conversation.compactionRange(before: question.order)
        else { return false }
        reply.compactionTried = true
        logger.info("conversation=\(conversation.id) reply=\(reply.message.id) context of about \(estimated) tokens passes compact_at"
            + " \(at) of \(contextTokens): summarising first")
        startCompaction(in: conversation, range: range, focus: nil, automatic: true, by: nil) { [unowned self] result in
            guard !reply.isOver, conversation.active === reply else { return }
            if case .failure(let failure) = result { reply.compactionFailure = failure.reason }
            startTurn(of: reply, in: conversation)
        }
        return true
    }

    /// What the reply's `context` says of a summary: the range it stands for, or why the one it
    /// waited for was not made.
    func noteCompaction(in context: inout ContextInfo?, of reply: Reply, in conversation: Conversation) {
        guard context != nil else { return }
        if let compaction = conversation.compaction, !compaction.covers(reply.message.id) { context?.summarised = compaction.rangeName }
        context?.compactionFailed = reply.compactionFailure
    }
}

extension Broker {
    /// `conversation.compact`: answered once the summary is stored (or failed).
    func compact(_ conversation: Conversation, _ params: CompactParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        guard conversation.compacting == nil else { throw .conflict("a summary of this conversation is being written already") }
        guard conversation.isSettled else {
            throw .conflict("cannot compact while a reply is in progress or queued: wait for it or cancel it (generation.cancel)")
        }
        if let focus = params.focus, focus.utf8.count > 4096 { throw .invalidParams("parameter \"focus\" is over 4096 bytes") }
        guard let range = conversation.compactionRange() else {
            throw .conflict(conversation.compaction == nil ? "nothing to compact: the conversation has no messages yet"
                            : "nothing to compact: no message came after the summary in force")
        }
        let focus = params.focus.flatMap { $0.trimmingWhitespace.isEmpty ? nil : $0.trimmingWhitespace }
        replies.startCompaction(in: conversation, range: range, focus: focus, automatic: false, by: client.info) { result in
            switch result {
            case .success(let compaction): respond(.success(CompactResult(compaction: compaction).json))
            case .failure(.cancelled): respond(.failure(.conflict("the summary was cancelled: nothing was stored")))
            case .failure(.deleted): respond(.failure(.notFound("no conversation \(conversation.id): it was deleted while its summary was written")))
            case .failure(.stopping(let storing)):
                respond(.failure(RPCError(code: RPCError.shuttingDown, message: storing
                    ? "confabd is shutting down while the summary was being stored: conversation.history shows whether it was, once it runs again"
                    : "confabd is shutting down: no summary was stored")))
            case .failure(.failed(let error)):
                respond(.failure(RPCError(code: RPCError.upstreamFailed, message: "no summary was stored: " + error.message, data: error.json)))
            }
        }
    }

    /// `conversation.uncompact`: the summary in force ends; the model is sent every message again.
    func uncompact(_ conversation: Conversation, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        guard let compaction = conversation.compaction else { throw .conflict("nothing to undo: no summary is in force") }
        guard conversation.compacting == nil else { throw .conflict("a summary is being written: cancel it (generation.cancel) first") }
        conversation.log.append([.uncompaction]) { [unowned self] error in
            if let error {
                return respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the summary stays: \(error)")))
            }
            guard !conversation.isDeleted else { return respond(.failure(.notFound("no conversation \(conversation.id)"))) }
            guard conversation.compaction == compaction else { return respond(.failure(.conflict("the summary changed meanwhile"))) }
            conversation.compaction = nil
            logger.info("conversation=\(conversation.id) compaction of \(compaction.rangeName) undone client=\(client.id)")
            respond(.success(UncompactResult(uncompacted: compaction).json))
            conversation.broadcast(.compactionUndone(compaction, by: client.info))
        }
    }

    /// A revision of a message the summary in force covers (an edit, a regenerated or continued
    /// reply) ends the summary: the record to write with it, if so.
    func uncompactionRecords(revising id: String, in conversation: Conversation) -> [LogRecord] {
        conversation.compactionCovers(id) ? [.uncompaction] : []
    }

    /// After such records are stored: the summary is no longer in force, and clients are told.
    func uncompacted(by records: [LogRecord], in conversation: Conversation) {
        guard records.contains(.uncompaction), let compaction = conversation.compaction else { return }
        conversation.compaction = nil
        logger.info("conversation=\(conversation.id) compaction of \(compaction.rangeName) ended by a revision inside it")
        conversation.broadcast(.compactionUndone(compaction, by: nil))
    }

    /// The summary a fork copies: the one in force, when the fork ends after its range, with its
    /// ids renumbered as the fork's messages are.
    static func forkedCompaction(_ compaction: Compaction?, at last: Message, renumbered: [Int: Int]) -> Compaction? {
        guard var compaction, !compaction.covers(last.id) || compaction.last == last.id,
              let firstOrder = MessageID.order(of: compaction.first), let lastOrder = MessageID.order(of: compaction.last) else { return nil }
        guard let first = renumbered.filter({ $0.key >= firstOrder.sequence }).min(by: { $0.key < $1.key })?.value,
              let lastSequence = renumbered[lastOrder.sequence] else { return nil }
        compaction.first = MessageID.make(first)
        compaction.last = MessageID.make(lastSequence, step: lastOrder.step)
        compaction.created = nil
        return compaction
    }
}
