import ConfabProtocol
import EventLoop
import LogStore
import Posix
import Upstream
#if canImport(Glibc)
import Glibc
#endif

public struct BrokerLimits: Sendable, Equatable {
    public var maxLineBytes = 4 << 20
    public var maxClientBufferBytes = 16 << 20
    public var maxClients = 256
    public var maxQueuedSends = 16
    public var maxHistory = 1000
    /// How often text of a streaming reply is written to its log (no fsync).
    public var replySaveIntervalMilliseconds: UInt64 = 250
    /// Replies streaming from the upstream at once, across conversations; more wait their turn.
    public var maxStreams = 16
    /// Further attempts after a refusal that streamed nothing (429, 5xx, connection, timeout).
    public var maxRetries = 2
    /// First backoff; it doubles with each attempt, capped at 30 s, unless Retry-After says otherwise.
    public var retryBaseMilliseconds: UInt64 = 1000
    public init() {}
}

/// The daemon's state and behaviour: every conversation, every client, every reply.
/// A request comes in through a `ClientSession`, is dispatched in `Methods.swift`, touches a
/// `Conversation`, goes to the log (`LogStore`) and the upstream (`UpstreamClient`), and
/// what follows is broadcast to every attached client.
public final class Broker {
    let loop: Loop
    let store: LogStore
    public let upstream: UpstreamClient
    /// Replaced on reload; a higher `maxStreams` lets replies waiting for a stream start now.
    public var limits: BrokerLimits {
        didSet { admitWaiting() }
    }
    public var logger: Logger
    /// uids besides our own that may connect.
    public var allowedUIDs: Set<UInt32>
    var conversations: [String: Conversation] = [:]
    /// Conversations with a reply ready to start, waiting for a free upstream stream.
    var waitingForStream: [Conversation] = []
    private var activeReplies = 0
    var clients: [String: ClientSession] = [:]
    private var nextClientNumber = 1
    private let startedAt: UInt64
    private(set) var isStopping = false
    private var listeners: [UnixListener] = []
    let ownUID = UInt32(getuid())
    let flusher: OutputFlusher

    public init(loop: Loop, store: LogStore, upstream: UpstreamClient, limits: BrokerLimits, logger: Logger, allowedUIDs: Set<UInt32> = []) {
        self.loop = loop
        self.store = store
        self.upstream = upstream
        self.limits = limits
        self.logger = logger
        self.allowedUIDs = allowedUIDs
        startedAt = loop.now
        flusher = OutputFlusher(loop: loop)
        upstream.onTransportError = { [unowned self] message in self.logger.error("upstream transport: \(message)") }
    }

    // MARK: - Start-up

    /// Loads every log; returns how many conversations were loaded.
    @discardableResult
    public func load(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) -> Int {
        let (loaded, problems) = store.loadAll(progress: progress)
        for problem in problems { logger.warning("log problem: \(problem)") }
        for item in loaded {
            conversations[item.conversation.header.id] = Conversation(replayed: item.conversation, log: item.log)
        }
        // Replies that were waiting their turn when the daemon stopped run now (they stream
        // once the loop runs), oldest conversation activity first.
        for conversation in conversations.values.sorted(by: { $0.updated < $1.updated }) where conversation.queuedCount > 0 {
            logger.notice("conversation=\(conversation.id) resuming \(conversation.queuedCount) queued repl\(conversation.queuedCount == 1 ? "y" : "ies")")
            startNextReply(in: conversation)
        }
        return loaded.count
    }

    /// Starts taking clients on a listening socket.
    public func serve(_ listener: UnixListener) throws(UVError) {
        listeners.append(listener)
        try listener.listen { [unowned self, unowned listener] error in
            if let error {
                logger.warning("accept failed: \(error)")
                return
            }
            do {
                accept(try listener.accept())
            } catch {
                logger.warning("accept failed: \(error)")
            }
        }
    }

    private func accept(_ stream: UnixStream) {
        guard let credentials = stream.peerCredentials else {
            logger.warning("connection refused: peer credentials unavailable")
            stream.close()
            return
        }
        guard credentials.uid == ownUID || allowedUIDs.contains(credentials.uid) else {
            logger.warning("connection refused: uid=\(credentials.uid) pid=\(credentials.pid) is not allowed")
            stream.close()
            return
        }
        let id = "c\(nextClientNumber)"
        nextClientNumber += 1
        let client = ClientSession(id: id, stream: stream, credentials: credentials, login: UserAccount.login(of: credentials.uid) ?? String(credentials.uid),
                                   maxLineBytes: limits.maxLineBytes, maxBufferBytes: limits.maxClientBufferBytes, flusher: flusher)
        if clients.count >= limits.maxClients || isStopping {
            let error = isStopping
                ? RPCError(code: RPCError.shuttingDown, message: "confabd is shutting down")
                : RPCError(code: RPCError.limitReached, message: "too many clients (limit \(limits.maxClients))")
            client.send(RPC.response(id: .null, error: error))
            client.finish(reason: error.message)
            logger.warning("client=\(id) refused: \(error.message)")
            return
        }
        clients[id] = client
        client.onClose = { [unowned self] client, reason in disconnected(client, reason: reason) }
        logger.info("client=\(id) connected uid=\(credentials.uid) pid=\(credentials.pid)")
        stream.startReading { [unowned self, unowned client] event in
            switch event {
            case .data(let bytes): received(bytes, from: client)
            case .endOfFile: client.close(reason: nil)
            case .failed(let error): client.close(reason: "read failed: \(error)")
            }
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer, from client: ClientSession) {
        do {
            try client.framer.feed(bytes) { line in
                guard !client.isClosed else { return }
                handle(line: line, from: client)
            }
        } catch {
            let error = RPCError(code: RPCError.lineTooLong, message: "line too long: the limit is \(limits.maxLineBytes) bytes; closing the connection")
            client.send(RPC.response(id: .null, error: error))
            client.finish(reason: "line over \(limits.maxLineBytes) bytes")
        }
    }

    private func disconnected(_ client: ClientSession, reason: String?) {
        clients[client.id] = nil
        for conversationID in client.attached {
            guard let conversation = conversations[conversationID] else { continue }
            if conversation.detach(client) {
                conversation.broadcast("client.detached", ["client": client.info.json])
            }
        }
        client.attached = []
        if let reason {
            logger.notice("client=\(client.id) disconnected: \(reason)")
        } else {
            logger.info("client=\(client.id) disconnected")
        }
    }

    // MARK: - Replies

    /// Starts the next queued reply of a conversation if none is running and a stream is free.
    func startNextReply(in conversation: Conversation) {
        guard conversation.active == nil, !conversation.isDeleted, !isStopping, conversation.queuedCount > 0 else { return }
        guard activeReplies < limits.maxStreams else {
            if !waitingForStream.contains(where: { $0 === conversation }) { waitingForStream.append(conversation) }
            return
        }
        guard let replyID = conversation.takeNextReply() else { return }
        let message = Message(id: replyID, conversation: conversation.id, role: "assistant", content: "", status: .streaming,
                              created: .now(), model: conversation.model)
        var request = ChatRequest(model: conversation.model, messages: conversation.context(before: replyID))
        request.temperature = upstream.config.temperature
        request.maxTokens = upstream.config.maxTokens
        let reply = Conversation.ActiveReply(message: message, request: request, now: loop.now)
        conversation.begin(reply)
        activeReplies += 1
        do {
            try conversation.log.write([.replyStarted(message)])
        } catch {
            logger.error("conversation=\(conversation.id) cannot store reply start: \(error)")
            conversation.broadcast("message.created", ["message": message.json])
            finishReply(in: conversation, status: .failed, error: MessageError(code: "storage", message: "cannot write the log: \(error)"))
            return
        }
        conversation.broadcast("message.created", ["message": message.json])
        logger.info("conversation=\(conversation.id) reply=\(replyID) started model=\(conversation.model) context=\(request.messages.count)")
        askUpstream(for: reply, in: conversation)
    }

    private func askUpstream(for reply: Conversation.ActiveReply, in conversation: Conversation) {
        reply.attempts += 1
        reply.stream = upstream.stream(reply.request) { [unowned self, unowned conversation, weak reply] event in
            guard let reply, conversation.active === reply else { return }
            switch event {
            case .text(let text): received(text, for: reply, in: conversation)
            case .finished(let finishReason, let usage, let error, let retryAfter):
                reply.stream = nil
                if let error, shouldRetry(error, reply) {
                    scheduleRetry(of: reply, in: conversation, after: error, retryAfterSeconds: retryAfter)
                    return
                }
                reply.message.finishReason = finishReason
                reply.message.usage = usage
                finishReply(in: conversation, status: error == nil ? .complete : .failed, error: error)
            }
        }
    }

    /// Only a refusal that streamed nothing is retried: then a second try cannot repeat text.
    private func shouldRetry(_ error: MessageError, _ reply: Conversation.ActiveReply) -> Bool {
        guard reply.message.content.isEmpty, reply.attempts <= limits.maxRetries, !isStopping else { return false }
        switch error.code {
        case "rate_limited", "upstream_connection", "upstream_timeout": return true
        case "upstream_http": return (error.status ?? 0) >= 500
        default: return false
        }
    }

    private func scheduleRetry(of reply: Conversation.ActiveReply, in conversation: Conversation, after error: MessageError, retryAfterSeconds: Int?) {
        let backoff = min(limits.retryBaseMilliseconds << UInt64(reply.attempts - 1), 30_000)
        let delay = retryAfterSeconds.map { UInt64(max(0, min($0, 300))) * 1000 } ?? backoff
        logger.warning("conversation=\(conversation.id) reply=\(reply.message.id) attempt \(reply.attempts) failed (\(error.code)): retrying in \(delay) ms")
        conversation.broadcast("message.retrying", [
            "message": .string(reply.message.id), "attempt": .int(reply.attempts), "delay_ms": .int(Int(delay)), "error": error.json,
        ])
        let timer = Timer(loop: loop)
        reply.retryTimer = timer
        timer.start(after: delay) { [unowned self, unowned conversation, weak reply] in
            timer.close()
            guard let reply, conversation.active === reply, !reply.isFinishing else { return }
            reply.retryTimer = nil
            askUpstream(for: reply, in: conversation)
        }
    }

    private func received(_ text: String, for reply: Conversation.ActiveReply, in conversation: Conversation) {
        reply.message.content += text
        conversation.broadcastDelta(message: reply.message.id, content: text)
        reply.unsavedText += text
        let now = loop.now
        if now - reply.lastSave >= limits.replySaveIntervalMilliseconds {
            saveText(of: reply, in: conversation)
            reply.lastSave = now
        }
    }

    /// Puts a streaming reply's recent text in its log (page cache only: it survives a
    /// daemon crash, not a power cut, and costs one write(2)).
    private func saveText(of reply: Conversation.ActiveReply, in conversation: Conversation) {
        guard !reply.unsavedText.isEmpty else { return }
        do {
            try conversation.log.write([.replyText(message: reply.message.id, content: reply.unsavedText)])
            reply.unsavedText = ""
        } catch {
            logger.warning("conversation=\(conversation.id) reply=\(reply.message.id) cannot save text: \(error)")
        }
    }

    /// Ends the reply in flight: records it durably, then announces it, then moves on.
    func finishReply(in conversation: Conversation, status: MessageStatus, error: MessageError?) {
        guard let reply = conversation.active, !reply.isFinishing else { return }
        reply.stop()
        // The reply itself stays `streaming` until its ending is durable: a client that
        // attaches during the sync gets it as `pending` and then the ending, as it would earlier.
        var ending = reply.message
        ending.status = status
        ending.error = error
        reply.ending = ending
        conversation.log.append([.replyFinished(ending)]) { [unowned self] storeError in
            // Deleted meanwhile, or already settled by shutdown: nothing left to announce.
            guard !conversation.isDeleted, conversation.active === reply else { return }
            announce(ending, of: conversation, storeError: storeError)
            startNextReply(in: conversation)
            admitWaiting()
        }
    }

    /// Announces how the reply in flight ended, once its final record is durable or could not
    /// be made so (then it is a `storage` failure: only what is stored is called completed).
    private func announce(_ ending: Message, of conversation: Conversation, storeError: StoreError?) {
        _ = conversation.end()
        replyEnded()
        var final = ending
        if let storeError {
            logger.error("conversation=\(conversation.id) reply=\(final.id) cannot store reply: \(storeError)")
            final.status = .failed
            final.error = MessageError(code: "storage", message: "cannot write the log: \(storeError)")
        }
        conversation.insert(final)
        if final.status == .failed {
            logger.warning("conversation=\(conversation.id) reply=\(final.id) failed: \(final.error?.code ?? "")")
            conversation.broadcast("message.failed", ["message": final.json, "error": final.error?.json ?? .null])
        } else {
            logger.info("conversation=\(conversation.id) reply=\(final.id) \(final.status.rawValue) chars=\(final.content.count)")
            conversation.broadcast("message.completed", ["message": final.json])
        }
    }

    /// A stream slot came free: count it, and let conversations that waited for one start.
    func replyEnded() {
        activeReplies -= 1
    }

    func admitWaiting() {
        while activeReplies < limits.maxStreams, !waitingForStream.isEmpty {
            startNextReply(in: waitingForStream.removeFirst())
        }
    }

    // MARK: - Status and shutdown

    public struct Counts: Sendable {
        public var conversations: Int
        public var clients: Int
        public var streams: Int
        public var queued: Int
    }

    public var counts: Counts {
        var streams = 0, queued = 0
        for conversation in conversations.values {
            if conversation.active != nil { streams += 1 }
            queued += conversation.queuedCount
        }
        return Counts(conversations: conversations.count, clients: clients.count, streams: streams, queued: queued)
    }

    var uptimeSeconds: Int { Int((loop.now - startedAt) / 1000) }

    /// Stops taking clients and work, saves replies in flight as `interrupted`, tells every
    /// client, lets their buffers drain, then calls `done`. Blocking writes are fine here.
    public func shutdown(reason: String, done: @escaping () -> Void) {
        guard !isStopping else { return }
        isStopping = true
        for listener in listeners { listener.close() }
        listeners = []
        for conversation in conversations.values {
            conversation.dropQueue()
            if let reply = conversation.active, let ending = reply.ending {
                // Its final record is written and its sync is on the thread pool: sync here
                // and announce now, before `server.stopping`, not after the clients are gone.
                announce(ending, of: conversation, storeError: conversation.log.syncNow())
                continue
            }
            guard let reply = conversation.end() else { continue }
            replyEnded()
            reply.stop()
            reply.message.status = .interrupted
            do {
                try conversation.log.write([.replyFinished(reply.message)])
                if let error = conversation.log.syncNow() { throw error }
            } catch {
                // Announce only what is stored: an unsaved ending is a storage failure.
                logger.error("conversation=\(conversation.id) reply=\(reply.message.id) cannot save interrupted reply: \(error)")
                reply.message.status = .failed
                reply.message.error = MessageError(code: "storage", message: "cannot write the log: \(error)")
            }
            conversation.insert(reply.message)
            if let error = reply.message.error {
                conversation.broadcast("message.failed", ["message": reply.message.json, "error": error.json])
                continue
            }
            conversation.broadcast("message.completed", ["message": reply.message.json])
            logger.notice("conversation=\(conversation.id) reply=\(reply.message.id) interrupted by shutdown chars=\(reply.message.content.count)")
        }
        let goodbye = OutboundBuffer(RPC.notification(method: "server.stopping", params: ["reason": .string(reason)]))
        let remaining = Array(clients.values)
        if remaining.isEmpty {
            done()
            return
        }
        // A client that does not read within two seconds is not waited for.
        let deadline = Timer(loop: loop)
        deadline.start(after: 2000) {
            for client in remaining { client.close(reason: "shutdown: client did not read in time") }
        }
        var open = remaining.count
        for client in remaining {
            let previous = client.onClose
            client.onClose = { client, reason in
                previous?(client, reason)
                open -= 1
                if open == 0 {
                    deadline.close()
                    done()
                }
            }
            client.send(goodbye)
            client.finish(reason: "shutdown")
        }
    }

    public func closeLogs() {
        for conversation in conversations.values { conversation.log.close() }
    }
}
