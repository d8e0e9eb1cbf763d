import ConfabProtocol
import DaemonSettings
import EventLoop
import LogStore

/// The protocol's methods (docs/protocol.md), one function each.
extension Broker {
    func handle(line: ArraySlice<UInt8>, from client: ClientSession) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        switch RPC.parse(line) {
        case .failure(let failure):
            client.send(RPC.response(id: failure.id, error: failure.error))
        case .success(.request(let id, let method, let params)):
            dispatch(method, params, from: client) { [largeAnswers] result in
                switch result {
                case .success(.value(let value)): return RPC.response(id: id, result: value)
                case .success(.written(let capacity, let write)):
                    if capacity >= LargeAnswers.large { largeAnswers.written() }
                    return RPC.response(id: id, capacity: capacity, result: write)
                case .failure(let error): return RPC.response(id: id, error: error)
                }
            }
        case .success(.notification(let method, let params)):
            dispatch(method, params, from: client) { _ in nil }
        case .success(.response), .success(.errorResponse):
            // confabd sends no requests, so there is nothing a response could answer.
            client.send(RPC.response(id: .null, error: RPCError(code: RPCError.invalidRequest,
                message: "invalid request: confabd sends no requests, so it takes no responses")))
        }
    }

    /// A method's answer: a value, or a result written straight into the answer's line by a
    /// function (a history page: megabytes of messages, written without a tree of them).
    enum Answer {
        case value(JSON)
        case written(capacity: Int, (inout [UInt8]) -> Void)
    }

    typealias Reply = (Result<Answer, RPCError>) -> [UInt8]?

    /// Where a method's answer goes. Called as a function with a value or an error; `written`
    /// for a result that writes itself.
    struct Respond {
        let send: (Result<Answer, RPCError>) -> Void

        func callAsFunction(_ result: Result<JSON, RPCError>) { send(result.map(Answer.value)) }

        func written(capacity: Int, _ write: @escaping (inout [UInt8]) -> Void) { send(.success(.written(capacity: capacity, write))) }

        /// A history page, written straight into its answer line (`HistoryResult.write`). A
        /// debug build checks every page against the bytes its tree writes.
        func history(_ page: HistoryResult) {
            #if DEBUG
            var direct: [UInt8] = [], tree: [UInt8] = []
            page.write(into: &direct)
            page.json.write(into: &tree)
            precondition(direct == tree, "a history page written without its tree differs from it: \(String(decoding: direct, as: UTF8.self))")
            #endif
            written(capacity: page.writtenSizeEstimate) { page.write(into: &$0) }
        }
    }

    private func dispatch(_ method: String, _ rawParams: JSON?, from client: ClientSession, encode: @escaping Reply) {
        // Answers that are known at once go straight out; ones that wait on the disk hold a
        // place in the client's outbox so everything it is sent keeps request order.
        let respond = Respond { result in
            if let bytes = encode(result) { client.send(bytes) }
        }
        var reserved: ClientSession.Slot?
        let later: () -> Respond = {
            let slot = client.reserve()
            reserved = slot
            return Respond { result in client.fill(slot, encode(result) ?? []) }
        }
        do throws(RPCError) {
            let params = try Params(rawParams)
            guard let known = RPCMethod(rawValue: method) else {
                throw RPCError(code: RPCError.methodNotFound, message: "method not found: \(method)")
            }
            let row = MethodRow.of(known)
            // The owner may call anything; another user's calls are checked against the role
            // table here, and again by `on` when a call waited for its conversation.
            if known != .hello { client.hasCalled = true }
            if !isOwner(client), case .needs(let needed) = row.access {
                try authorize(known, row, needs: needed, params, client)
            }
            if row.refusedWhileStopping { try refuseWhenStopping() }
            switch row.run {
            case .plain(let run):
                let answer: Respond = row.answer == .inPlace ? later() : respond
                try run(self, MethodRow.Call(params: params, client: client, respond: answer, later: later))
            case .on(let readiness, let run):
                try on(params, known, row, readiness, client, now: row.answer == .inPlace ? later : { respond }, later: later) { [unowned self] c, answer throws(RPCError) in
                    try run(self, c, MethodRow.Call(params: params, client: client, respond: answer, later: later))
                }
            }
        } catch {
            // A method that reserved its place and then refused its params answers in that place.
            if let reserved {
                client.fill(reserved, encode(.failure(error)) ?? [])
            } else {
                respond(.failure(error))
            }
        }
    }

    /// Whether a request waiting for its conversation has been answered (from the log's end).
    private final class Answered {
        var done = false
    }

    /// Runs a method on the conversation the params name once it is ready for it (see
    /// `whenReady`): at once, answering through `now()`, or after the requests before it,
    /// answering in a place in the client's outbox held by `later()` meanwhile. One that waited
    /// is checked again: the conversation may have been unshared or deleted, or shutdown begun.
    private func on(_ params: Params, _ known: RPCMethod, _ row: MethodRow, _ readiness: MethodRow.Readiness, _ client: ClientSession,
                    now: () -> Respond, later: () -> Respond,
                    _ method: @escaping (Conversation, Respond) throws(RPCError) -> Void) throws(RPCError) {
        let conversation = try conversation(params)
        if readiness == .asIs {
            try method(conversation, now())
            return
        }
        let needsMessages = readiness == .messages
        if isReady(conversation, needsMessages: needsMessages) {
            conversation.lastUsed = loop.now
            try method(conversation, now())
            return
        }
        let answer = later()
        // The first page of a conversation not in memory is read from its log's end (`LogTail`),
        // then the whole log is outlined for everything else, as for any request: a long
        // conversation's first page waits neither for the rest nor beside it. The requests that
        // come meanwhile wait for the full read, as ever.
        let early = known == .conversationHistory && conversation.contents == .onDisk
            ? (try? HistoryParams(params, bounds: bounds)).flatMap { $0.before == nil ? $0.limit ?? 50 : nil } : nil
        let answered = Answered()
        let resume: (RPCError?) -> Void = { [unowned self] error in
            guard !answered.done else { return }
            answered.done = true
            if let error { return answer(.failure(error)) }
            guard !conversation.isDeleted else { return answer(.failure(.notFound("no conversation \(conversation.id)"))) }
            do throws(RPCError) {
                // Unshared, or made read-only, while the call waited.
                if case .needs(let needed) = row.access { try permit(known, needs: needed, on: conversation, client) }
                if row.refusedWhileStopping { try refuseWhenStopping() }
                try method(conversation, answer)
            } catch {
                answer(.failure(error))
            }
        }
        guard let early else { return whenReady(conversation, needsMessages: needsMessages, resume) }
        whenReady(conversation, after: { [unowned self] then in
            store.readTail(conversation.log, limit: early) { [unowned self] page in
                defer { then() }
                guard let page, !answered.done, !conversation.isDeleted else { return }
                if case .needs(let needed) = row.access, (try? permit(known, needs: needed, on: conversation, client)) == nil { return }
                answered.done = true
                logger.debug("conversation=\(conversation.id) first page read from the log's end")
                answer.history(HistoryResult(messages: page.messages, more: page.more, compaction: page.compaction))
            }
        }, resume)
    }

    // MARK: - Parameters

    /// Refuses a call of another user that its role on the conversation named (or, with none
    /// named, its not being the owner) does not allow. A conversation it cannot see is one
    /// that does not exist, as far as it can tell.
    private func authorize(_ method: RPCMethod, _ row: MethodRow, needs: Permission, _ params: Params, _ client: ClientSession) throws(RPCError) {
        guard row.isAboutOneConversation else { throw RPCError.notPermitted(method, has: nil, needs: needs) }
        try permit(method, needs: needs, on: try conversation(params), client)
    }

    func permit(_ method: RPCMethod, needs: Permission, on conversation: Conversation, _ client: ClientSession) throws(RPCError) {
        let has = permission(of: client, on: conversation)
        guard let has else { throw .notFound("no conversation \(conversation.id)") }
        guard has >= needs else { throw RPCError.notPermitted(method, has: has, needs: needs) }
    }

    func permission(of client: ClientSession, on conversation: Conversation) -> Permission? {
        let uidHas = Permission.of(client.credentials.uid, owner: ownUID, shares: conversation.log.shares)
        guard let link = client.link else { return uidHas }
        return link.permission(on: conversation.id, uidHas: uidHas)
    }

    /// The owner itself: its uid, and no share link declared on the connection.
    func isOwner(_ client: ClientSession) -> Bool { client.credentials.uid == ownUID && client.link == nil }

    private func conversation(_ params: Params) throws(RPCError) -> Conversation {
        let id = try ConversationTarget(params).conversation
        guard ConversationID.isValid(id) else {
            throw .invalidParams("parameter \"conversation\" is not a conversation id (12 characters of 0-9 and a-z without i, l, o, u)")
        }
        guard let conversation = conversations[id] else { throw .notFound("no conversation \(id)") }
        return conversation
    }

    func title(_ value: String) throws(RPCError) -> String {
        guard !value.isEmpty, value.count <= 200, !value.contains(where: { $0.isNewline }) else {
            throw .invalidParams("parameter \"title\" must be 1 to 200 characters on one line")
        }
        return value
    }

    func unusedConversationID() -> String {
        var id = ConversationID.make()
        while conversations[id] != nil { id = ConversationID.make() }
        return id
    }

    /// A conversation whose log was just created holding `messages` (a welcome, a fork's
    /// copy): in memory and listed, any reply its messages are owed queued.
    func adopt(_ log: ConversationLog, header: ConversationHeader, messages: [Message]) -> Conversation {
        let conversation = Conversation(log: log)
        var replayed = ReplayedConversation(new: header)
        replayed.messages = messages
        conversation.take(replayed)
        conversation.lastUsed = loop.now
        conversations[header.id] = conversation
        listOrder.changed(conversation)
        return conversation
    }

    func refuseWhenStopping() throws(RPCError) {
        if isStopping { throw RPCError(code: RPCError.shuttingDown, message: "confabd is shutting down") }
    }

    // MARK: - Methods

    /// `hello`, answered at once; past its class's bound, the client is told why and hung up
    /// (the slot was only lent).
    func hello(_ call: MethodRow.Call) {
        let answer: Result<JSON, RPCError>
        do throws(RPCError) { answer = .success(try hello(HelloParams(call.params), call.client).json) } catch { answer = .failure(error) }
        call.respond(answer)
        if case .failure(let error) = answer, error.code == RPCError.limitReached {
            logger.warning("client=\(call.client.id) refused at hello: \(error.message)")
            call.client.finish(reason: error.message)
        }
    }

    func hello(_ params: HelloParams, _ client: ClientSession) throws(RPCError) -> HelloResult {
        let program = params.client ?? ""
        if let problem = DisplayName.characterProblem(program) { throw .invalidParams("parameter \"client\" \(problem)") }
        client.clientName = DisplayName.programName(program)
        let name = params.name
        if let name, let problem = DisplayName.problem(name) { throw .invalidParams("parameter \"name\" \(problem)") }
        let grant = try linkGrant(params.link, client)
        let gateway = params.gateway ?? false
        if (gateway || grant != nil) && !client.isGatewayClass {
            if let refusal = gatewayLimit(for: client, link: grant?.id) { throw refusal }
            client.declareGateway()
        }
        if let grant {
            client.declare(link: grant)
            logger.info("client=\(client.id) is share link \(grant.id) (\(grant.role.rawValue) on conversation=\(grant.conversation))")
        }
        if let name { client.name = name }
        let link = client.link.map { LinkDeclaration(id: $0.id, conversation: $0.conversation, role: $0.role) }
        return HelloResult(version: ProtocolVersion.confabVersion, clientID: client.id,
                           user: HelloUser(uid: Int(client.credentials.uid), login: client.login, name: client.name, link: link))
    }

    /// `hello`'s `link`: `{"id", "conversation", "role"}`, declared once, in the first `hello`
    /// before any other call, and never taken back or changed: it can only lower what the
    /// connection may do. Nil when the params name none.
    private func linkGrant(_ declared: LinkDeclaration?, _ client: ClientSession) throws(RPCError) -> LinkGrant? {
        guard let declared else { return nil }
        let (id, conversation, role) = (declared.id, declared.conversation, declared.role)
        guard LinkGrant.isValidID(id) else { throw .invalidParams("parameter \"link.id\" must be 1 to 32 of A-Z, a-z, 0-9, - and _") }
        guard ConversationID.isValid(conversation) else { throw .invalidParams("parameter \"link.conversation\" is not a conversation id") }
        let grant = LinkGrant(id: id, conversation: conversation, role: role)
        if let declared = client.link {
            guard declared == grant else { throw .invalidParams("parameter \"link\": this connection is share link \(declared.id) already") }
            return nil
        }
        guard !client.hasCalled else {
            throw .invalidParams("parameter \"link\": a link is declared in the first hello, before any other call")
        }
        return grant
    }

    func status(for client: ClientSession) -> StatusResult {
        // Another user is told only of what it can see: the conversations shared with it, its own connections.
        let counts = isOwner(client) ? self.counts : self.counts(visibleTo: client)
        var status = StatusResult()
        status.version = ProtocolVersion.confabVersion
        status.uptimeSeconds = uptimeSeconds
        status.conversations = counts.conversations
        status.clients = counts.clients
        status.streams = counts.streams
        status.queued = counts.queued
        status.searches = searchCount(visibleTo: client)
        return status
    }

    /// Searches running or waiting: all of them for the owner, another user's own for it (when
    /// the owner searches is not another user's to learn).
    func searchCount(visibleTo client: ClientSession) -> Int { searchCount(visibleTo: client.credentials.uid, link: client.link) }

    /// The same for `uid` through share link `link` (none: the uid itself).
    func searchCount(visibleTo uid: UInt32, link: LinkGrant? = nil) -> Int {
        let all = pendingSearches + (runningSearch.map { [$0] } ?? [])
        return uid == ownUID && link == nil ? all.count : all.count { $0.uid == uid && $0.link == link }
    }

    func create(_ params: CreateParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let title = try title(params.title ?? "untitled")
        var profile: Profile?
        if let name = params.profile {
            guard let named = profiles[name] else {
                let known = profiles.sorted.map(\.name)
                throw .invalidParams("no profile \"\(name)\": " + (known.isEmpty ? "the config has none" : "the config has \(known.joined(separator: ", "))"))
            }
            profile = named
        } else if params.provider == nil {
            // The default profile is where a conversation that names nothing starts; one that
            // names its provider has chosen elsewhere.
            profile = profiles.defaultProfile
        }
        let system = params.system ?? profile?.system
        let providerName = params.provider ?? profile?.provider ?? providers.defaultName
        guard let provider = providers[providerName] else {
            throw .invalidParams("no provider \"\(providerName)\": the config has \(providers.names.joined(separator: ", "))")
        }
        // A profile's model is one of its provider's: with another provider named, that one's applies.
        let profileModel = profile?.provider == providerName ? profile?.model : nil
        guard let model = params.model ?? profileModel ?? provider.config.model else {
            throw .invalidParams("provider \"\(providerName)\" has no default model: name one with \"model\"")
        }
        guard !model.isEmpty, model.count <= 200, !model.contains(where: { $0.isWhitespace }) else {
            throw .invalidParams("parameter \"model\" must be 1 to 200 characters without spaces")
        }
        let sampling = (profile?.params ?? SamplingParameters()).overridden(by: params.params ?? SamplingParameters())
        if let key = sampling.keys.first(where: provider.api.unsupportedParameters.contains) {
            throw .invalidParams("parameter params.\(key.rawValue) is not one the \(provider.api.name) API takes (provider \"\(providerName)\")")
        }
        let id = unusedConversationID()
        let created = Timestamp.now()
        // Neither named nor the profile's: the default, which it follows until one is chosen.
        let header = ConversationHeader(id: id, created: created, title: title, model: model, system: system, provider: providerName,
                                        profile: profile?.name, params: sampling,
                                        modelIsDefault: params.model == nil && profileModel == nil)
        // The profile's welcome is what the assistant says first: stored complete, never asked for.
        let welcome = (profile?.welcome ?? []).enumerated().map { index, text in
            Message(id: MessageID.make(index + 1), conversation: id, role: .assistant, content: text, status: .complete, created: created,
                    quickReplies: index == (profile?.welcome.count ?? 0) - 1 && profile?.quickReplies.isEmpty == false ? profile?.quickReplies : nil)
        }
        store.create(header, records: welcome.map(LogRecord.message)) { [unowned self] result in
            switch result {
            case .success(let log):
                let conversation = adopt(log, header: header, messages: welcome)
                logger.info("conversation=\(id) created client=\(client.id) provider=\(providerName) model=\(model)\(profile.map { " profile=\($0.name)" } ?? "")")
                respond(.success(ConversationResult(conversation: conversation.info).json))
            case .failure(let error):
                logger.error("conversation=\(id) client=\(client.id) cannot create: \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed: \(error)")))
            }
        }
    }

    func profilesList() -> ProfilesListResult {
        ProfilesListResult(profiles: profiles.sorted.map { profile in
            ListedProfile(name: profile.name, provider: profile.provider, model: profile.model ?? providers[profile.provider]?.config.model,
                          system: profile.system, params: profile.params, isDefault: profile.name == profiles.defaultName)
        })
    }

    func list(_ params: ListParams, _ client: ClientSession) -> ListResult {
        let limit = params.limit ?? 100
        if !isOwner(client) {
            let shared = conversations.values.filter { permission(of: client, on: $0) != nil }
                .sorted { $0.updated != $1.updated ? $0.updated > $1.updated : $0.id > $1.id }
            return ListResult(conversations: shared.prefix(limit).map(\.info))
        }
        // Most recent first, from the order kept between calls (`ListOrder`).
        return ListResult(conversations: listOrder.first(limit, of: conversations.values).map(\.info))
    }

    func rename(_ conversation: Conversation, _ params: RenameParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let title = try title(params.title)
        conversation.log.append([.title(title)]) { [unowned self] error in
            if let error {
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed: \(error)")))
                return
            }
            guard !conversation.isDeleted else {
                respond(.failure(.notFound("no conversation \(conversation.id)")))
                return
            }
            conversation.title = title
            logger.info("conversation=\(conversation.id) renamed client=\(client.id)")
            respond(.success(ConversationResult(conversation: conversation.info).json))
            conversation.broadcast(.conversationUpdated(conversation.info))
        }
    }

    func delete(_ conversation: Conversation, _ respond: Respond) {
        conversation.isDeleted = true
        conversations[conversation.id] = nil
        listOrder.changed(conversation)
        replies.forget(conversation)
        conversation.broadcast(ConversationEvent.conversationDeleted)
        for client in conversation.detachAll() { client.attached.remove(conversation.id) }
        store.delete(conversation.log) { [unowned self] error in
            if let error {
                logger.error("conversation=\(conversation.id) delete: \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed: \(error)")))
            } else {
                logger.info("conversation=\(conversation.id) deleted")
                respond(.success(DeleteResult(deleted: conversation.id).json))
                // Only now that the log is gone for good: a crash before this keeps the log and its blobs.
                collectBlobs(conversation.log.blobs, why: "conversation=\(conversation.id) deleted")
            }
        }
    }

    func attach(_ conversation: Conversation, _ params: AttachParams, _ client: ClientSession) throws(RPCError) -> AttachResult {
        let count = params.history ?? 50
        // Only the owner may watch unseen: another user's attach is announced whatever it asks.
        let quiet = (params.quiet ?? false) && isOwner(client)
        let result = AttachResult(
            conversation: conversation.info,
            messages: try conversation.lastMessages(count).messages,
            // While its tool calls run, the reply's last turn is stored; the calls are in `tools`.
            pending: conversation.active.flatMap { $0.isRunningTools ? nil : $0.message },
            tools: conversation.active?.toolRuns.filter { !$0.isStored }.map { $0.ending ?? $0.message } ?? [],
            clients: conversation.present.filter { $0 !== client }.map(\.info), compaction: conversation.compaction)
        if !quiet, !conversation.attached.contains(where: { $0 === client }) { try spendPresence(of: client) }
        if conversation.attach(client, quiet: quiet) {
            client.attached.insert(conversation.id)
            if !quiet { conversation.broadcast(.clientAttached(client.info), except: client) }
            logger.info("conversation=\(conversation.id) client=\(client.id) attached")
        }
        return result
    }

    func detach(_ conversation: Conversation, _ client: ClientSession) -> DetachResult {
        let quiet = conversation.isQuiet(client)
        let detached = conversation.detach(client)
        if detached {
            client.attached.remove(conversation.id)
            if !quiet { conversation.broadcast(.clientDetached(client.info)) }
        }
        return DetachResult(detached: detached)
    }

    func history(_ conversation: Conversation, _ params: HistoryParams) throws(RPCError) -> HistoryResult {
        let limit = params.limit ?? 50
        var before: MessageOrder?
        if let id = params.before {
            guard let order = MessageID.order(of: id) else { throw .invalidParams("parameter \"before\" is not a message id") }
            before = order
        }
        let page = try conversation.lastMessages(limit, before: before)
        return HistoryResult(messages: page.messages, more: page.more, compaction: conversation.compaction)
    }

    func send(_ conversation: Conversation, _ params: SendParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let content = params.content
        let attachments = try attachments(params.attachments ?? [], client)
        try refuseImages(attachments, in: conversation)
        guard attachments.isEmpty ? content.contains(where: { !$0.isWhitespace }) : true else {
            throw .invalidParams("parameter \"content\" must not be empty (without attachments)")
        }
        // One reply in progress plus `maxQueuedSends` waiting behind it.
        guard conversation.unfinishedReplies <= limits.maxQueuedSends else {
            throw RPCError(code: RPCError.limitReached, message: "too many sends waiting in this conversation (limit \(limits.maxQueuedSends))")
        }
        let ids = conversation.reserveSend()
        let message = Message(id: ids.message, conversation: conversation.id, role: .user, content: content,
                              status: .complete, created: .now(), author: client.author(), attachments: attachments.isEmpty ? nil : attachments)
        conversation.sendsBeingStored += 1
        #if DEBUG
        let records: [LogRecord] = DebugFault.strikes(.unstoredAnnounce) ? [] : [.message(message)]  // CONFAB_DEBUG_FAULT
        #else
        let records: [LogRecord] = [.message(message)]
        #endif
        conversation.log.append(records) { [unowned self] error in
            conversation.sendsBeingStored -= 1
            if let error {
                logger.error("conversation=\(conversation.id) cannot store message: \(error)")
                respond(.failure(RPCError(code: RPCError.storageFailed, message: "storage failed, the message was not stored: \(error)")))
                return
            }
            guard !conversation.isDeleted else {
                respond(.failure(.notFound("no conversation \(conversation.id)")))
                return
            }
            conversation.insert(message)
            markSent(attachments, by: client)
            #if DEBUG
            if !attachments.isEmpty, DebugFault.strikes(.blobRemoved) { store.blobs.remove(attachments.map(\.sha256)) }  // CONFAB_DEBUG_FAULT
            #endif
            logger.info("conversation=\(conversation.id) message=\(message.id) stored client=\(client.id) chars=\(content.count)"
                + (attachments.isEmpty ? "" : " attachments=\(attachments.count)"))
            logger.debug("conversation=\(conversation.id) message=\(message.id) content=\(content)")
            respond(.success(SendResult(message: message, reply: ids.reply).json))
            conversation.broadcast(.messageCreated(message))
            conversation.enqueueReply(ids.reply, requestedBy: client.author())
            replies.startNext(in: conversation)
        }
    }

    func cancel(_ conversation: Conversation, _ params: CancelParams, _ client: ClientSession) throws(RPCError) -> CancelResult {
        let only = params.message
        if let only, MessageID.sequence(of: only) == nil { throw .invalidParams("parameter \"message\" is not a message id") }
        let chain = only.flatMap(MessageID.sequence(of:))
        // A summary being written is what is stopped first (a reply waiting for it goes on without it).
        if only == nil, replies.cancelCompaction(in: conversation, by: client.info) { return CancelResult(cancelled: "compaction") }
        return CancelResult(cancelled: replies.cancel(in: conversation, chain: chain, by: client))
    }
}
