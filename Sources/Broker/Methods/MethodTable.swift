import ConfabProtocol

/// Every method's facts in one row: who may call it, what it acts on, when it may run and how
/// it answers, and what it runs. `dispatch` reads the row and checks its flags in one place;
/// a new method is a row here, a typed call in ConfabProtocol and its implementation.
struct MethodRow {
    /// When a conversation named by the params is ready for the method.
    enum Readiness {
        /// As it is, loaded or not (its summary is enough).
        case asIs
        /// Nothing is being read for it.
        case header
        /// Its messages are in memory.
        case messages
    }

    /// How the answer goes out.
    enum Answer {
        /// At once through `respond`, when the method can answer without waiting. A call on a
        /// conversation that has to wait for it answers in a held place instead.
        case atOnce
        /// A place in the client's outbox is held before it runs (its answer waits on the
        /// disk, a thread or a server), so everything the client is sent keeps request order.
        case inPlace
        /// Given both: the method holds the place itself when it has to wait (`blob.put`'s
        /// final chunk).
        case either
    }

    /// What one call has to work with.
    struct Call {
        let params: Params
        let client: ClientSession
        /// Where the answer goes: at once or in the place held, as the row's `answer` says.
        let respond: Broker.Respond
        /// Holds a place in the client's outbox (for `.either`).
        let later: () -> Broker.Respond
    }

    /// What it runs: on no conversation, or on the one the params name once it is ready.
    enum Run {
        case plain((Broker, Call) throws(RPCError) -> Void)
        case on(Readiness, (Broker, Conversation, Call) throws(RPCError) -> Void)
    }

    /// The role it needs (docs/protocol.md, "Sharing and roles").
    let access: MethodAccess
    /// Refused with -32005 once shutdown has begun: it would start new work.
    let refusedWhileStopping: Bool
    let answer: Answer
    let run: Run

    /// Whether it names the conversation it acts on (`conversation` in its params).
    var isAboutOneConversation: Bool {
        if case .on = run { return true }
        return false
    }

    init(_ access: MethodAccess, refusedWhileStopping: Bool = false, answer: Answer, _ run: Run) {
        self.access = access
        self.refusedWhileStopping = refusedWhileStopping
        self.answer = answer
        self.run = run
    }
}

extension MethodRow {
    /// The table: one row per method, the switch exhaustive so that a method without one does
    /// not compile.
    static func of(_ method: RPCMethod) -> MethodRow {
        switch method {
        case .hello:
            return MethodRow(.anyone, answer: .atOnce, .plain { b, call throws(RPCError) in b.hello(call) })
        case .status:
            return MethodRow(.anyone, answer: .atOnce, .plain { b, call throws(RPCError) in call.respond(.success(b.status(for: call.client).json)) })
        case .conversationCreate:
            return MethodRow(.needs(.owner), refusedWhileStopping: true, answer: .inPlace,
                             .plain { b, call throws(RPCError) in try b.create(CreateParams(call.params), call.client, call.respond) })
        case .profilesList:
            return MethodRow(.needs(.owner), answer: .atOnce, .plain { b, call throws(RPCError) in call.respond(.success(b.profilesList().json)) })
        case .conversationList:
            return MethodRow(.anyone, answer: .atOnce, .plain { b, call throws(RPCError) in call.respond(.success(try b.list(ListParams(call.params), call.client).json)) })
        case .conversationGet:
            return MethodRow(.needs(.read), answer: .atOnce, .on(.asIs) { _, c, call throws(RPCError) in call.respond(.success(ConversationResult(conversation: c.info).json)) })
        case .conversationRename:
            return MethodRow(.needs(.owner), answer: .inPlace, .on(.messages) { b, c, call throws(RPCError) in try b.rename(c, RenameParams(call.params), call.client, call.respond) })
        case .conversationConfigure:
            return MethodRow(.needs(.owner), answer: .inPlace, .on(.messages) { b, c, call throws(RPCError) in try b.configure(c, ConfigureParams(call.params), call.client, call.respond) })
        case .conversationDelete:
            return MethodRow(.needs(.owner), answer: .inPlace, .on(.header) { b, c, call throws(RPCError) in b.delete(c, call.respond) })
        case .conversationAttach:
            return MethodRow(.needs(.read), answer: .atOnce, .on(.messages) { b, c, call throws(RPCError) in call.respond(.success(try b.attach(c, AttachParams(call.params, bounds: b.bounds), call.client).json)) })
        case .conversationDetach:
            return MethodRow(.needs(.read), answer: .atOnce, .on(.header) { b, c, call throws(RPCError) in call.respond(.success(b.detach(c, call.client).json)) })
        case .conversationHistory:
            return MethodRow(.needs(.read), answer: .atOnce, .on(.messages) { b, c, call throws(RPCError) in call.respond.history(try b.history(c, HistoryParams(call.params, bounds: b.bounds))) })
        case .messageSend:
            return MethodRow(.needs(.write), refusedWhileStopping: true, answer: .inPlace,
                             .on(.messages) { b, c, call throws(RPCError) in try b.send(c, SendParams(call.params), call.client, call.respond) })
        case .messageRegenerate:
            return MethodRow(.needs(.write), refusedWhileStopping: true, answer: .inPlace,
                             .on(.messages) { b, c, call throws(RPCError) in try b.regenerate(c, call.client, call.respond) })
        case .messageEdit:
            return MethodRow(.needs(.write), refusedWhileStopping: true, answer: .inPlace,
                             .on(.messages) { b, c, call throws(RPCError) in try b.edit(c, EditParams(call.params), call.client, call.respond) })
        case .messageContinue:
            return MethodRow(.needs(.write), refusedWhileStopping: true, answer: .atOnce,
                             .on(.messages) { b, c, call throws(RPCError) in call.respond(.success(try b.continueReply(c, call.client).json)) })
        case .conversationFork:
            return MethodRow(.needs(.owner), refusedWhileStopping: true, answer: .inPlace,
                             .on(.messages) { b, c, call throws(RPCError) in try b.fork(c, ForkParams(call.params), call.client, call.respond) })
        case .conversationSearch:
            return MethodRow(.anyone, refusedWhileStopping: true, answer: .inPlace, .plain { b, call throws(RPCError) in try b.search(SearchParams(call.params), call.client, call.respond) })
        case .modelsList:
            return MethodRow(.needs(.owner), refusedWhileStopping: true, answer: .inPlace, .plain { b, call throws(RPCError) in try b.listModels(ModelsListParams(call.params), call.respond) })
        case .toolApprove:
            return MethodRow(.needs(.owner), answer: .atOnce, .on(.header) { b, c, call throws(RPCError) in call.respond(.success(try b.approve(c, ApproveParams(call.params), call.client).json)) })
        case .conversationShare:
            return MethodRow(.needs(.owner), answer: .inPlace, .on(.messages) { b, c, call throws(RPCError) in try b.share(c, ShareParams(call.params), call.client, call.respond) })
        case .conversationUnshare:
            return MethodRow(.needs(.owner), answer: .inPlace, .on(.messages) { b, c, call throws(RPCError) in try b.unshare(c, UnshareParams(call.params), call.client, call.respond) })
        case .generationCancel:
            return MethodRow(.needs(.write), answer: .atOnce, .on(.header) { b, c, call throws(RPCError) in call.respond(.success(try b.cancel(c, CancelParams(call.params), call.client).json)) })
        case .blobPut:
            // A blob belongs to the connection that stored it until a message it may send names it.
            return MethodRow(.anyone, refusedWhileStopping: true, answer: .either,
                             .plain { b, call throws(RPCError) in try b.blobPut(BlobPutParams(call.params), call.client, now: call.respond, later: call.later) })
        case .attachmentGet:
            return MethodRow(.needs(.read), answer: .inPlace, .on(.messages) { b, c, call throws(RPCError) in try b.attachmentGet(c, AttachmentGetParams(call.params), call.respond) })
        // Tool descriptions and server errors may hold the owner's paths and settings; a
        // restart ends calls in flight in every conversation.
        case .toolsList:
            return MethodRow(.needs(.owner), answer: .inPlace, .plain { b, call throws(RPCError) in try b.listTools(ToolsListParams(call.params), call.respond) })
        case .conversationCompact:
            return MethodRow(.needs(.write), refusedWhileStopping: true, answer: .inPlace,
                             .on(.messages) { b, c, call throws(RPCError) in try b.compact(c, CompactParams(call.params), call.client, call.respond) })
        case .conversationUncompact:
            return MethodRow(.needs(.write), answer: .inPlace,
                             .on(.messages) { b, c, call throws(RPCError) in try b.uncompact(c, call.client, call.respond) })
        case .mcpRestart:
            return MethodRow(.needs(.owner), answer: .inPlace, .plain { b, call throws(RPCError) in try b.restartMCPServer(MCPRestartParams(call.params), call.client, call.respond) })
        case .usageSummary:
            // What the owner's conversations cost is the owner's business.
            return MethodRow(.needs(.owner), answer: .inPlace, .plain { b, call throws(RPCError) in try b.usageSummary(UsageParams(call.params), call.client, call.respond) })
        }
    }
}

extension Broker {
    /// The limits some params are checked against as they are read.
    var bounds: RPCBounds { RPCBounds(maxHistory: limits.maxHistory) }
}
