import ConfabProtocol
import EventLoop
import LogStore
import Tools
import Upstream

/// A reply's tool calls: the turn that asked for them is stored, each call becomes a `tool`
/// message (`m2.1`, `m2.2`, …), calls are checked, approved where the tool wants a person's
/// yes, made over HTTP on the loop, all at once, and stored as they end; once every one is,
/// the model's next turn starts. Cancel, shutdown and deletion stop them where they are.
extension ReplyRunner {
    /// Starts the calls a stored turn asked for.
    func runTools(_ calls: [ToolCall], of reply: Reply, in conversation: Conversation) {
        reply.toolRounds += 1
        // Another user's message may steer the model into any offered tool: each call then
        // spends the owner's secrets only once the owner, told who asked, says yes.
        let planned = PlannedToolCall.plan(calls, offered: offeredTools(in: conversation), requestedBy: reply.requestedBy, ownUID: ownUID,
                                           conversation: conversation.id, chain: reply.chain, firstStep: reply.nextStep, created: .now())
        reply.nextStep += planned.count
        let runs = planned.map { plan in
            let run = ToolRun(call: plan.call, message: plan.message, tool: plan.tool)
            run.arguments = plan.arguments
            run.refusal = plan.refusal
            return run
        }
        reply.toolRuns = runs
        do {
            try conversation.log.write(runs.map { .replyStarted($0.message) })
        } catch {
            logger.error("conversation=\(conversation.id) reply=\(reply.message.id) cannot store tool calls: \(error)")
            closeChain(of: reply, in: conversation, status: .failed,
                       error: MessageError(code: .storage, message: "cannot write the log: \(error)"))
            return
        }
        for run in runs {
            if run.isWaitingForApproval {
                requestApproval(for: run, of: reply, in: conversation)
            } else if let refusal = run.refusal {
                conversation.broadcast(.toolStarted(message: run.message, call: run.call))
                logger.warning("conversation=\(conversation.id) call=\(run.call.id) tool=\(Self.loggable(run.call.name)) refused: \(refusal.code.rawValue)")
                end(run, of: reply, in: conversation, status: .failed, error: refusal,
                    content: "Error: \(refusal.message). The call was not made.")
            } else {
                startCall(run, of: reply, in: conversation)
            }
        }
    }

    private func requestApproval(for run: ToolRun, of reply: Reply, in conversation: Conversation) {
        let requester = run.message.tool?.requestedBy.map { " requested by uid=\($0.uid)\($0.link.map { " link=" + $0 } ?? "") client=\($0.clientID)" } ?? ""
        logger.info("conversation=\(conversation.id) call=\(run.call.id) tool=\(run.call.name) waiting for approval\(requester)")
        conversation.broadcast(.toolApprovalRequested(message: run.message, call: run.call))
        let timer = Timer(loop: loop)
        run.approvalTimer = timer
        let seconds = limits.toolApprovalTimeoutSeconds
        timer.start(after: UInt64(seconds) * 1000) { [unowned self] in
            timer.close()
            guard !reply.isOver, run.isWaitingForApproval else { return }
            run.approvalTimer = nil
            decide(run, allow: false, by: nil, of: reply, in: conversation,
                   reason: "nobody approved this call within \(seconds) s, so it was not made")
        }
    }

    /// `tool.approve`: true when the call was waiting and this answer decided it.
    func answerApproval(of callID: String, allow: Bool, in conversation: Conversation, by client: ClientSession) -> Bool {
        guard let reply = conversation.active, !reply.isFinishing,
              let run = reply.toolRuns.first(where: { $0.call.id == callID && $0.isWaitingForApproval }) else { return false }
        decide(run, allow: allow, by: client, of: reply, in: conversation, reason: "the user denied this call, so it was not made")
        return true
    }

    private func decide(_ run: ToolRun, allow: Bool, by client: ClientSession?, of reply: Reply,
                        in conversation: Conversation, reason: String) {
        run.approvalTimer?.close()
        run.approvalTimer = nil
        run.message.tool?.approval = allow ? .approved : .denied
        run.message.tool?.decidedBy = client?.author()
        logger.info("conversation=\(conversation.id) call=\(run.call.id) \(allow ? "approved" : "denied") by \(client.map { "client=\($0.id)" } ?? "the approval timeout")")
        conversation.broadcast(allow ? .toolApproved(call: run.call.id, by: client?.info) : .toolDenied(call: run.call.id, by: client?.info))
        guard allow else {
            end(run, of: reply, in: conversation, status: .failed, error: MessageError(code: .toolDenied, message: reason),
                content: "Error: \(reason).")
            return
        }
        // Should the daemon die during the call, the log says it had been approved.
        try? conversation.log.write([.replyStarted(run.message)])
        startCall(run, of: reply, in: conversation)
    }

    /// Makes the call through the tool's source; its ending goes through `end` as every
    /// call's does.
    private func startCall(_ run: ToolRun, of reply: Reply, in conversation: Conversation) {
        guard let tool = run.tool, let arguments = run.arguments else { return }
        conversation.broadcast(.toolStarted(message: run.message, call: run.call))
        let context = ToolCallContext(conversation: conversation.id, call: run.call.id, name: run.call.name)
        let handle = tool.source.start(tool, arguments: arguments, as: context, progress: { [unowned self] update in
            guard !reply.isOver, run.ending == nil else { return }
            report(update, of: run, of: reply, in: conversation)
        }, done: { [unowned self] ending in
            guard !reply.isOver, run.ending == nil else { return }
            run.inFlight = nil
            run.message.tool?.durationMilliseconds = ending.durationMilliseconds
            if let status = ending.httpStatus { run.message.tool?.httpStatus = status }
            if let truncated = ending.truncated { run.message.tool?.truncated = truncated }
            end(run, of: reply, in: conversation, status: ending.status, error: ending.error, content: ending.content)
        })
        if run.ending == nil, !reply.isOver { run.inFlight = handle }
    }

    /// A call's progress as every attached client sees it, at most once per
    /// `progressIntervalMilliseconds`: a report within that is held and sent when it is over
    /// (replaced by a newer one), and the last held is sent before the call's `tool.completed`.
    /// The tool's words are untrusted: redacted, control characters as `?`, cut short.
    private func report(_ update: ToolCallProgress, of run: ToolRun, of reply: Reply, in conversation: Conversation) {
        let text = update.message.map { Self.progressText($0, secrets: secrets) }
        let progress = ToolProgress(message: run.message.id, call: run.call.id, tool: run.call.name,
                                    progress: update.progress, total: update.total, text: text)
        let now = loop.now
        guard let sent = run.progressSentAt, now - sent < Self.progressIntervalMilliseconds else {
            run.progressSentAt = now
            run.heldProgress = nil
            return conversation.broadcast(.toolProgress(progress))
        }
        run.heldProgress = progress
        guard run.progressTimer == nil else { return }
        let timer = Timer(loop: loop)
        run.progressTimer = timer
        timer.start(after: sent + Self.progressIntervalMilliseconds - now) { [unowned self] in
            timer.close()
            run.progressTimer = nil
            guard !reply.isOver, run.ending == nil else { return }
            sendHeldProgress(of: run, in: conversation)
        }
    }

    private func sendHeldProgress(of run: ToolRun, in conversation: Conversation) {
        guard let held = run.heldProgress else { return }
        run.heldProgress = nil
        run.progressSentAt = loop.now
        conversation.broadcast(.toolProgress(held))
    }

    /// Decides how a call ended and stores it; once every call of the turn is stored, the next turn starts.
    private func end(_ run: ToolRun, of reply: Reply, in conversation: Conversation,
                     status: MessageStatus, error: MessageError?, content: String) {
        guard run.ending == nil else { return }
        sendHeldProgress(of: run, in: conversation)
        run.stop()
        var ending = run.message
        ending.status = status
        ending.error = error
        ending.content = content
        run.ending = ending
        conversation.log.append([.replyFinished(ending)]) { [unowned self] storeError in
            guard !conversation.isDeleted, !reply.isOver, !run.isStored else { return }
            store(run, storeError: storeError, in: conversation)
            guard !reply.isFinishing, reply.toolRuns.allSatisfy(\.isStored) else { return }
            reply.toolRuns = []
            guard !isStopping else { return }
            let next = Message(id: MessageID.make(reply.chain, step: reply.nextStep), conversation: conversation.id, role: .assistant,
                               content: "", status: .streaming, created: .now(), model: conversation.model,
                               params: conversation.params.isEmpty ? nil : conversation.params)
            reply.nextStep += 1
            reply.message = next
            reply.isAnnounced = false
            reply.attempts = 0
            reply.unsavedText = ""
            reply.unsavedReasoning = ""
            reply.reasoningItems = []
            reply.continued = nil
            startTurn(of: reply, in: conversation)
        }
    }

    /// A call's ending is durable (or could not be made so: then it is a `storage` failure).
    private func store(_ run: ToolRun, storeError: StoreError?, in conversation: Conversation) {
        guard var final = run.ending else { return }
        run.isStored = true
        if let storeError {
            logger.error("conversation=\(conversation.id) call=\(run.call.id) cannot store the result: \(storeError)")
            final.status = .failed
            final.error = MessageError(code: .storage, message: "cannot write the log: \(storeError)")
        }
        conversation.insert(final)
        conversation.broadcast(.toolCompleted(final))
    }

    /// Ends the reply while its calls run (cancel, or a log that cannot be written): every call
    /// not ended yet ends with `status`, and an empty assistant turn with that status closes the
    /// reply, so every client following it sees its end.
    func closeChain(of reply: Reply, in conversation: Conversation, status: MessageStatus, error: MessageError? = nil) {
        reply.stop()
        var records: [LogRecord] = []
        for run in reply.toolRuns where run.ending == nil {
            var ending = run.message
            ending.status = status
            ending.error = error
            ending.content = status == .cancelled ? "The call was cancelled by the user before it ended." : "The call did not end: \(error?.message ?? status.rawValue)."
            run.ending = ending
            records.append(.replyFinished(ending))
        }
        let closing = Message(id: MessageID.make(reply.chain, step: reply.nextStep), conversation: conversation.id, role: .assistant,
                              content: "", status: status, created: .now(), model: conversation.model, error: error)
        reply.nextStep += 1
        reply.message = closing
        reply.ending = closing
        records.append(.replyFinished(closing))
        conversation.log.append(records) { [unowned self] storeError in
            guard !conversation.isDeleted, !reply.isOver else { return }
            announceStoredCalls(of: reply, in: conversation, storeError: storeError)
            announce(closing, of: conversation, storeError: storeError)
            endReply(reply, in: conversation)
        }
    }

    /// Announces every call whose ending was written and not yet announced (it is durable now).
    func announceStoredCalls(of reply: Reply, in conversation: Conversation, storeError: StoreError?) {
        for run in reply.toolRuns where run.ending != nil && !run.isStored {
            store(run, storeError: storeError, in: conversation)
        }
        reply.toolRuns = []
    }

    /// Shutdown while calls run: each unfinished one is stored `interrupted` now (blocking is
    /// fine here) and announced; no further turn starts.
    func interruptCalls(of reply: Reply, in conversation: Conversation) {
        reply.stop()
        var records: [LogRecord] = []
        for run in reply.toolRuns where run.ending == nil {
            var ending = run.message
            ending.status = .interrupted
            ending.content = Replay.interruptedCall
            run.ending = ending
            records.append(.replyFinished(ending))
        }
        var storeError: StoreError?
        do {
            try conversation.log.write(records)
            storeError = conversation.log.syncNow()
        } catch {
            storeError = error
        }
        announceStoredCalls(of: reply, in: conversation, storeError: storeError)
        logger.notice("conversation=\(conversation.id) reply=\(reply.message.id) tool calls interrupted by shutdown")
    }

    /// The least time between two `tool.progress` of one call.
    static let progressIntervalMilliseconds: UInt64 = 250

    /// A tool's progress words as clients are shown them: cut to `ToolProgress.maxTextCharacters`
    /// first (a long text is not redacted whole only to be cut), the part kept redacted as a cut
    /// text (a secret the cut split is taken out too), then every Unicode control and format
    /// character (C0, DEL, C1 such as U+009B, bidi overrides, zero-width characters) and line or
    /// paragraph separator as `?`.
    static func progressText(_ words: String, secrets: SecretRedactor) -> String {
        let limit = ToolProgress.maxTextCharacters
        var kept = Substring(words)
        var isCut = false
        if let end = words.index(words.startIndex, offsetBy: limit, limitedBy: words.endIndex), end < words.endIndex {
            kept = words[..<words.index(words.startIndex, offsetBy: limit - 1)]
            isCut = true
        }
        let redacted = secrets.redacting(String(kept), cutAtEnd: isCut)
        var safe = String(String.UnicodeScalarView(redacted.unicodeScalars.map { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: "?"
            default: scalar
            }
        }))
        // A joiner made `?` splits one character into several: the bound still holds.
        if safe.count > (isCut ? limit - 1 : limit) {
            safe = String(safe.prefix(limit - 1))
            isCut = true
        }
        return isCut ? safe + "…" : safe
    }

    /// Text from a URL or the model as the log may show it: at most 300 characters, control characters as `?`.
    static func loggable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(300).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
    }
}
