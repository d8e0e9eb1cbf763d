import ConfabProtocol
import LogStore
import Upstream

/// What a reply's request is made of before anything is read: the stored messages it sends
/// (held whole, or known by where they are in the log) and the summary that stands before them,
/// if one does. Two plans are equal when they send the same messages with the same summary: a
/// plan made again once the log has been read, and not equal, means the conversation changed
/// while it was read.
struct ContextPlan: Equatable {
    let entries: [StoredEntry]
    let summary: Compaction?

    /// The messages to read from the log, in order.
    var stored: [StoredMessage] {
        entries.compactMap { entry in
            if case .stored(let place) = entry { return place }
            return nil
        }
    }

    /// The plan's messages, those known by place taken in order from `read`.
    func messages(read: [Message]) -> [Message] {
        var next = read.makeIterator()
        return entries.compactMap { entry in
            switch entry {
            case .held(let message): return message
            case .stored: return next.next()
            }
        }
    }

    static func == (a: ContextPlan, b: ContextPlan) -> Bool {
        a.summary == b.summary && a.entries.elementsEqual(b.entries) { x, y in
            switch (x, y) {
            case (.held(let one), .held(let other)): one.id == other.id
            case (.stored(let one), .stored(let other)): one == other
            default: false
            }
        }
    }
}

extension Conversation {
    /// What a reply's request sends: with a summary in force whose range ends before the reply,
    /// the turns after the range and the summary; else every turn before the reply that nothing
    /// replaced.
    func contextPlan(before reply: String) -> ContextPlan {
        let limit = MessageID.order(of: reply) ?? MessageOrder(sequence: Int.max)
        guard let compaction, let replyOrder = MessageID.order(of: reply), let lastOrder = MessageID.order(of: compaction.last),
              replyOrder > lastOrder
        else { return ContextPlan(entries: entries.filter { $0.order < limit && $0.supersededBy == nil }, summary: nil) }
        return ContextPlan(entries: entries.filter { $0.order > lastOrder && $0.order < limit && $0.supersededBy == nil }, summary: compaction)
    }

    /// The request's turns for a reply from its plan's messages: the system prompt, the summary
    /// (a user turn of its own, or joined to the first turn after it when that is a user turn),
    /// then the turns.
    func context(_ plan: ContextPlan, messages: [Message], before reply: String) -> [ChatMessage] {
        var context = Self.context(of: messages, system: system, before: reply, provider: provider, model: model)
        guard let compaction = plan.summary else { return context }
        let position = context.first?.role == .system ? 1 : 0
        let summary = compaction.contextText
        if position < context.count, context[position].role == .user {
            let next = context[position]
            context[position] = ChatMessage(role: .user, content: next.content.isEmpty ? summary : summary + "\n\n" + next.content,
                                            attachments: next.attachments)
        } else {
            context.insert(ChatMessage(role: .user, content: summary), at: position)
        }
        return context
    }
}

extension ReplyRunner {
    /// Reads the context of the reply's turn: the records it sends are read from the log on the
    /// thread pool (a long conversation's would stall every other client), then `ready` runs on
    /// the loop with the request's turns, or why they could not be read. With nothing to read
    /// (every message written since the log was read), `ready` runs at once.
    ///
    /// While the read runs the reply is in flight and not yet announced. A reply that ends
    /// meanwhile (cancelled, its conversation deleted, shutdown) hears nothing more; a
    /// conversation whose context changed meanwhile (a summary undone) is planned and read again.
    func readContext(of reply: Reply, in conversation: Conversation, ready: @escaping (Result<[ChatMessage], MessageError>) -> Void) {
        let plan = conversation.contextPlan(before: reply.message.id)
        let stored = plan.stored
        guard !stored.isEmpty else {
            return ready(.success(conversation.context(plan, messages: plan.messages(read: []), before: reply.message.id)))
        }
        conversation.log.readMessages(stored, on: loop) { [unowned self] result in
            contextReadsAnswered += 1
            guard !reply.isOver, !reply.isFinishing, conversation.active === reply else { return }
            guard conversation.contextPlan(before: reply.message.id) == plan else {
                logger.debug("conversation=\(conversation.id) reply=\(reply.message.id) context changed while it was read: reading it again")
                return readContext(of: reply, in: conversation, ready: ready)
            }
            switch result {
            case .success(let read):
                ready(.success(conversation.context(plan, messages: plan.messages(read: read), before: reply.message.id)))
            case .failure(let error):
                ready(.failure(MessageError(code: .storage, message: "storage failed: cannot read the conversation's log: \(error)")))
            }
        }
    }
}
