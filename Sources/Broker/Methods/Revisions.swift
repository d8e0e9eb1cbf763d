import ConfabProtocol
import LogStore

/// Methods that change a conversation's course without rewriting its log: a regenerated reply,
/// an edited last message, a continued reply and a fork. Each adds records (`superseded`, a new
/// message, a new log); what came before stays in the history.
extension Broker {
    /// `message.regenerate`: a new reply to the last user message; the reply it replaces stays,
    /// marked `superseded_by` the new one, and leaves the model's context.
    func regenerate(_ conversation: Conversation, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        try refuseUnlessSettled(conversation, doing: "regenerate")
        let current = conversation.current
        guard let question = current.last(where: { $0.role == .user }),
              let previous = current.last(where: { $0.role == .assistant && $0.sequence > question.sequence })
        else { throw .conflict("nothing to regenerate: the last message has no reply yet") }
        // A reply that called tools is all the messages of its chain (`m2`, `m2.1`, …): all are replaced.
        let replaced = current.filter { $0.role != .user && $0.sequence == previous.sequence }
        let replyID = conversation.reserveReply()
        let replacedID = MessageID.make(previous.sequence)
        // A summary covering the reply replaced described it: it ends with it.
        let uncompaction = uncompactionRecords(revising: replacedID, in: conversation)
        conversation.sendsBeingStored += 1
        conversation.log.append(uncompaction + replaced.map { .superseded(message: $0.id, by: replyID) }) { [unowned self] error in
            conversation.sendsBeingStored -= 1
            if let error {
                logger.error("conversation=\(conversation.id) cannot store regenerate: \(error)")
                return respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, nothing was regenerated: \(error)")))
            }
            guard !conversation.isDeleted else { return respond(.failure(.notFound("no conversation \(conversation.id)"))) }
            uncompacted(by: uncompaction, in: conversation)
            for old in replaced { conversation.markSuperseded(old.id, by: replyID) }
            logger.info("conversation=\(conversation.id) reply=\(replacedID) regenerated as \(replyID) client=\(client.id)")
            respond(.success(RegenerateResult(reply: replyID, replaces: replacedID).json))
            for old in replaced {
                conversation.broadcast(.messageSuperseded(message: old.id, by: replyID))
            }
            conversation.enqueueReply(replyID, requestedBy: client.author())
            replies.startNext(in: conversation)
        }
    }

    /// `message.edit`: the last user message, changed, is stored as a new message that
    /// supersedes it and the replies to it; then it is answered as a send is.
    func edit(_ conversation: Conversation, _ params: EditParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let id = params.message
        guard MessageID.sequence(of: id) != nil else { throw .invalidParams("parameter \"message\" is not a message id") }
        let content = params.content
        guard let original = try conversation.message(id) else {
            throw .notFound("no message \(id) in conversation \(conversation.id)")
        }
        // A message that carries files may, as when it was sent, have no text of its own.
        guard content.contains(where: { !$0.isWhitespace }) || !original.attachmentDigests.isEmpty else {
            throw .invalidParams("parameter \"content\" must not be empty")
        }
        guard original.role == .user else { throw .invalidParams("message \(id) is a reply: only your own messages can be edited") }
        let current = conversation.current
        guard original.supersededBy == nil, current.last(where: { $0.role == .user })?.id == id else {
            throw .conflict("only the last message can be edited; to change an earlier one, fork the conversation "
                + "before it (conversation.fork with at: the message before \(id)) and send the new text there")
        }
        try refuseUnlessSettled(conversation, doing: "edit a message")
        let replaced = current.filter { $0.role != .user && $0.sequence > original.sequence }
        let ids = conversation.reserveSend()
        // The files stay with the message: an edit changes its text.
        var message = Message(id: ids.message, conversation: conversation.id, role: .user, content: content,
                              status: .complete, created: .now(), author: client.author(), attachments: original.attachments)
        message.otherAttachments = original.otherAttachments
        let superseded = [original.id] + replaced.map(\.id)
        // An edit inside the summary's range ends the summary.
        let uncompaction = uncompactionRecords(revising: id, in: conversation)
        conversation.sendsBeingStored += 1
        // The new message first: should a crash keep only part of this append, what survives
        // is a message and perhaps some of its superseded records, never a `by` that names
        // a message the log does not hold (which would read as a regenerated reply owed).
        // The uncompaction first, as a regenerate writes it: a torn write that keeps a superseded
        // record of a message the summary covers then keeps its end too.
        conversation.log.append(uncompaction + [.message(message)] + superseded.map { .superseded(message: $0, by: ids.message) }) { [unowned self] error in
            conversation.sendsBeingStored -= 1
            if let error {
                logger.error("conversation=\(conversation.id) cannot store edit: \(error)")
                return respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the message was not changed: \(error)")))
            }
            guard !conversation.isDeleted else { return respond(.failure(.notFound("no conversation \(conversation.id)"))) }
            uncompacted(by: uncompaction, in: conversation)
            for old in superseded { conversation.markSuperseded(old, by: ids.message) }
            conversation.insert(message)
            logger.info("conversation=\(conversation.id) message=\(id) edited as \(ids.message) client=\(client.id)")
            respond(.success(EditResult(message: message, reply: ids.reply, replaces: id).json))
            for old in superseded {
                conversation.broadcast(.messageSuperseded(message: old, by: ids.message))
            }
            conversation.broadcast(.messageCreated(message))
            conversation.enqueueReply(ids.reply, requestedBy: client.author())
            replies.startNext(in: conversation)
        }
    }

    /// `message.continue`: the last reply, cut off by the model's length limit, goes on in the
    /// same message.
    func continueReply(_ conversation: Conversation, _ client: ClientSession) throws(RPCError) -> ContinueResult {
        try refuseUnlessSettled(conversation, doing: "continue a reply")
        guard let lastEntry = conversation.current.last, lastEntry.role == .assistant,
              let last = try conversation.messages([lastEntry]).first else {
            throw .conflict("nothing to continue: the last message is not a reply")
        }
        // A budget spent thinking left no text to go on from: continuing would only think again.
        if last.error?.code == .thinkingExhausted {
            throw .conflict(last.error?.message ?? ReplyErrorCode.thinkingExhausted.rawValue)
        }
        guard last.finishReason == "length" else {
            throw .conflict("nothing to continue: the last reply ended with finish_reason \(last.finishReason ?? "none") "
                + "(only one cut off for length, finish_reason \"length\", can be continued)")
        }
        // Going on with a reply the summary covers: the summary ends (written before the reply's
        // start, which syncs it).
        let uncompaction = uncompactionRecords(revising: last.id, in: conversation)
        if !uncompaction.isEmpty {
            do { try conversation.log.write(uncompaction) } catch {
                throw RPCError(code: RPCError.storageFailed, message: "storage failed, nothing was continued: \(error)")
            }
            uncompacted(by: uncompaction, in: conversation)
        }
        conversation.continuing = last.id
        conversation.enqueueReply(last.id, requestedBy: client.author())
        logger.info("conversation=\(conversation.id) reply=\(last.id) to be continued client=\(client.id)")
        replies.startNext(in: conversation)
        return ContinueResult(reply: last.id)
    }

    /// `conversation.fork`: a new conversation holding a copy of this one's messages up to and
    /// including `at` (default: all), renumbered from `m1`. A copy that ends with your message is
    /// answered, as a send would be.
    func fork(_ conversation: Conversation, _ params: ForkParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        // A reply being continued is out of the stored messages until it ends: a copy now
        // would leave out a reply that has been stored all along.
        guard conversation.continuing == nil, conversation.active?.continued == nil else {
            throw .conflict("cannot fork while a reply is being continued: wait for it or cancel it (generation.cancel)")
        }
        var at: Message?
        if let id = params.at {
            guard MessageID.order(of: id) != nil else { throw .invalidParams("parameter \"at\" is not a message id") }
            guard let message = try conversation.message(id) else {
                throw .notFound("no message \(id) in conversation \(conversation.id)")
            }
            at = message
        }
        let copied = Self.forkedHistory(try conversation.allMessages(), at: at)
        guard let last = copied.last else { throw .conflict("nothing to fork: the conversation has no stored messages yet") }
        var title = String(("fork of " + conversation.title).prefix(200))
        if let given = params.title { title = try self.title(given) }
        let id = unusedConversationID()
        let origin = ForkOrigin(conversation: conversation.id, message: last.id)
        let header = ConversationHeader(id: id, created: .now(), title: title, model: conversation.model,
                                        system: conversation.system, forkedFrom: origin, provider: conversation.provider,
                                        profile: conversation.profile, params: conversation.params,
                                        modelIsDefault: conversation.modelIsDefault)
        // Renumbered from m1, a reply's tool-call chain kept together: `m5`, `m5.1` become `m2`, `m2.1`.
        var renumbered: [Int: Int] = [:]
        let messages = copied.map { original in
            var message = original
            let order = original.order
            let sequence = renumbered[order.sequence] ?? (renumbered.count + 1)
            renumbered[order.sequence] = sequence
            message.id = MessageID.make(sequence, step: order.step)
            message.conversation = id
            message.supersededBy = nil
            return message
        }
        // Until the fork is listed, only its log names the files it copies: a delete of the
        // original meanwhile must not collect them.
        let held = holdBlobs(of: messages)
        // A fork after the summary's range keeps it; one before or inside it copies none.
        let compaction = Self.forkedCompaction(conversation.compaction, at: last, renumbered: renumbered)
        let records: [LogRecord] = messages.map { $0.role == .user ? .message($0) : .replyFinished($0) } + (compaction.map { [.compaction($0)] } ?? [])
        store.create(header, records: records) { [unowned self] result in
            releaseBlobs(held)
            switch result {
            case .success(let log):
                let fork = adopt(log, header: header, messages: messages)
                fork.compaction = compaction.map { var kept = $0; kept.created = .now(); return kept }
                logger.info("conversation=\(id) forked from \(conversation.id) at \(last.id) messages=\(messages.count) client=\(client.id)")
                respond(.success(ForkResult(conversation: fork.info, reply: fork.queue.first).json))
                replies.startNext(in: fork)
            case .failure(let error):
                logger.error("conversation=\(id) client=\(client.id) cannot fork \(conversation.id): \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed: \(error)")))
            }
        }
    }

    /// The conversation as it stood at `at`: every message up to it that nothing before it had
    /// replaced, and `at` itself even when something later did (forking an earlier version of a
    /// reply keeps that version).
    static func forkedHistory(_ messages: [Message], at: Message?) -> [Message] {
        guard let at else { return messages.filter { $0.supersededBy == nil } }
        return messages.filter { message in
            guard message.order <= at.order else { return false }
            if message.id == at.id { return true }
            guard let newer = message.supersededBy.flatMap(MessageID.order(of:)) else { return true }
            return newer > at.order
        }
    }

    private func refuseUnlessSettled(_ conversation: Conversation, doing what: String) throws(RPCError) {
        guard conversation.isSettled else {
            throw .conflict("cannot \(what) while a reply is in progress or queued: wait for it or cancel it (generation.cancel)")
        }
    }
}
