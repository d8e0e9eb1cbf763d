import ConfabLog
import ConfabProtocol
import DaemonSettings
import EventLoop
import LogStore
import Posix
import ServiceSettings
import Tools
import Upstream
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's state and behaviour: every conversation, every client, every reply.
/// A request comes in through a `ClientSession`, is dispatched in `Methods.swift`, touches a
/// `Conversation`, goes to the log (`LogStore`) and the upstream (`UpstreamClient`), and
/// what follows is broadcast to every attached client.
public final class Broker {
    let loop: Loop
    let store: LogStore
    public var upstream: any ReplyUpstream { replies.upstream }
    /// The settings in force, shared with the reply runner (`CurrentSettings` says what a
    /// replacement changes for whom).
    let current: CurrentSettings
    /// A reload is one assignment: from then on everything reads the new value; a higher
    /// `maxStreams` lets replies waiting for a stream start now, and the connections of a uid
    /// taken off `access.allow_uids` close.
    public var settings: Settings {
        get { current.value }
        set {
            let previous = current.value
            current.replace(with: newValue)
            replies.settingsReplaced()
            followDefaultModels()
            closeClients(noLongerAllowedBy: previous.allowedUIDs)
        }
    }
    var providers: ProviderTable { current.providers }
    var profiles: ProfileTable { current.profiles }
    var limits: BrokerLimits { current.limits }
    var allowedUIDs: Set<UInt32> { current.allowedUIDs }
    /// The daemon's log, its secrets those of the settings in force.
    public var logger: Logger { current.logger }
    /// Every configured secret, redacted from what comes from outside (a model server's
    /// errors, model listings' errors, tool results) before it is stored, sent or logged, and
    /// from every log line.
    var secrets: SecretRedactor { current.secrets }
    let replies: ReplyRunner
    /// `models.list`'s listings, fetched and kept per provider.
    let models: ModelCatalog
    var conversations: [String: Conversation] = [:]
    /// `conversation.list`'s order, kept between calls; told of every conversation whose time
    /// may have changed (each log write, through the store), created or deleted.
    let listOrder = ListOrder<Conversation>(updated: \.updated.milliseconds, id: \.id, isGone: \.isDeleted)
    var clients: [String: ClientSession] = [:]
    /// Blobs named by logs being created and not yet listed (a fork's copied messages), with
    /// how many such logs name each: not collected meanwhile (`Blobs.swift`).
    var blobsInNewLogs: [String: Int] = [:]
    /// `conversation.search` requests waiting to run, and the one running (`Search.swift`).
    var pendingSearches: [SearchJob] = []
    var runningSearch: SearchJob?
    /// The uids with searches waiting, in the order they are served next: one search each in turn.
    var searchRotation: [UInt32] = []
    /// Within each uid, its connections with searches waiting, in the order they are served next.
    var searchClientRotation: [UInt32: [String]] = [:]
    /// What `usage.summary` has summed of each conversation (`Usage.swift`).
    let usageLedger = UsageLedger()
    /// Another user's announced comings and goings (`Presence.swift`), by uid.
    var presenceBudgets: [String: PresenceBudget] = [:]
    private var nextClientNumber = 1
    private let startedAt: UInt64
    /// Set by `shutdown` (and by a test that asks what a stopping daemon still takes).
    var isStopping = false
    private var listeners: [UnixListener] = []
    let ownUID = UInt32(getuid())
    /// Why no blob is collected until the next start: a log on disk did not load, and what it
    /// names is unknown (`Blobs.swift`).
    var blobCollectionHeld: String?
    let flusher: OutputFlusher
    let largeAnswers: LargeAnswers

    /// `mcpLauncher`: what MCP servers' commands are run through (the daemon's own executable,
    /// binding their lives to its own); empty: run directly.
    public init(loop: Loop, store: LogStore, upstream: any ReplyUpstream, settings: Settings, logger: Logger, mcpLauncher: [String] = []) {
        self.loop = loop
        self.store = store
        current = CurrentSettings(settings, logger: logger)
        replies = ReplyRunner(loop: loop, upstream: upstream, settings: current, ownUID: ownUID, mcpLauncher: mcpLauncher)
        replies.attachmentReader = store.blobs
        models = ModelCatalog(loop: loop, upstream: upstream, settings: current)
        startedAt = loop.now
        flusher = OutputFlusher(loop: loop)
        largeAnswers = LargeAnswers(loop: loop)
        upstream.onTransportError = { [unowned self] message in self.logger.error("upstream transport: \(message)") }
        models.onFailure = { [unowned self] provider, error in
            self.logger.warning("provider=\(provider) model listing failed: \(error.code.rawValue): \(error.message)")
        }
    }

    // MARK: - Start-up

    /// Lists every conversation from the store's index, reading only the logs it cannot vouch
    /// for and those with replies to resume, then resumes those replies. Returns how many
    /// conversations there are. `progress` hears about the logs read in full.
    @discardableResult
    public func load(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) -> Int {
        let started = Self.monotonicMilliseconds
        let opened = store.openConversations(progress: progress)
        for problem in opened.problems { logger.warning("log problem: \(problem)") }
        store.onIndexProblem = { [unowned self] problem in logger.warning("\(problem); the next start reads the logs instead") }
        store.onLogChanged = { [unowned self] log in
            if let conversation = conversations[log.id] { listOrder.changed(conversation) }
        }
        conversations.reserveCapacity(opened.items.count)
        for item in opened.items {
            let conversation = Conversation(log: item.log)
            if let replayed = item.conversation { conversation.take(replayed) }
            conversations[conversation.id] = conversation
        }
        followDefaultModels()
        logger.info("\(opened.fromIndex) conversations listed from the index, \(opened.read) logs read, in \(Self.monotonicMilliseconds - started) ms")
        // What a crash between a blob and its message, a connection that stored files and sent
        // nothing, or a delete cut short left behind.
        // None at all while a log on disk did not load: its messages may name any of them.
        if let reason = opened.notLoaded.first {
            blobCollectionHeld = reason + (opened.notLoaded.count > 1 ? " (and \(opened.notLoaded.count - 1) more)" : "")
        }
        collectBlobs(store.blobs.storedDigests(), why: "start-up")
        // Replies that were waiting their turn when the daemon stopped run now (they stream
        // once the loop runs), oldest conversation activity first.
        for conversation in conversations.values.filter({ $0.queuedCount > 0 }).sorted(by: { $0.updated < $1.updated }) {
            logger.notice("conversation=\(conversation.id) resuming \(conversation.queuedCount) queued repl\(conversation.queuedCount == 1 ? "y" : "ies")")
            replies.startNext(in: conversation)
        }
        startUnloadingIdle(every: limits.unloadIdleMilliseconds)
        startDroppingIdleUploads()
        return conversations.count
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
        if let error = isStopping ? RPCError(code: RPCError.shuttingDown, message: "confabd is shutting down") : connectionLimit(for: credentials.uid) {
            client.send(RPC.response(id: .null, error: error))
            client.finish(reason: error.message)
            logger.warning("client=\(id) refused: \(error.message)")
            return
        }
        clients[id] = client
        client.onClose = { [unowned self] client, reason in disconnected(client, reason: reason) }
        client.onRoomToRead = { [unowned self] client in resumeReading(client) }
        logger.info("client=\(id) connected uid=\(credentials.uid) pid=\(credentials.pid)")
        startReading(client)
    }

    /// Connections one other user may hold: an eighth of `limits.max_clients` (at least one).
    var maxClientsPerOtherUser: Int { max(1, limits.maxClients / 8) }
    /// Connections only the owner may take: an eighth of `limits.max_clients` (at least one),
    /// so that other users together cannot lock it out of its own daemon.
    var clientsKeptForOwner: Int { max(1, limits.maxClients / 8) }

    /// Why one more connection of `uid` is refused, or nil when it is not.
    private func connectionLimit(for uid: UInt32) -> RPCError? {
        if clients.count >= limits.maxClients {
            return RPCError(code: RPCError.limitReached, message: "too many clients (limit \(limits.maxClients))")
        }
        guard uid != ownUID else { return nil }
        if clients.values.count(where: { $0.credentials.uid == uid }) >= maxClientsPerOtherUser {
            return RPCError(code: RPCError.limitReached, message: "too many connections of uid \(uid) (limit \(maxClientsPerOtherUser) per user)")
        }
        if notOwnersCount >= limits.maxClients - clientsKeptForOwner {
            return RPCError(code: RPCError.limitReached, message: "too many clients (limit \(limits.maxClients), \(clientsKeptForOwner) kept for the owner)")
        }
        return nil
    }

    /// Connections not the owner's own: other uids', and the gateway's class (which a share
    /// link's are in). Together never more than `max_clients` less `clientsKeptForOwner`.
    private var notOwnersCount: Int { clients.values.count { $0.credentials.uid != ownUID || $0.isGatewayClass } }

    /// Connections that declared the gateway's at `hello`, share links' included: a quarter
    /// of `limits.max_clients` (at least one).
    var maxGatewayClients: Int { max(1, limits.maxClients / 4) }
    /// Connections one share link may hold: as many as one other user.
    var maxClientsPerLink: Int { maxClientsPerOtherUser }

    /// Why `client` may not join the gateway's class (as `link`'s, when it names one), or nil.
    /// Checked at `hello`: the slot it holds since it was accepted is given back when refused.
    func gatewayLimit(for client: ClientSession, link: String?) -> RPCError? {
        let gateway = clients.values.filter { $0 !== client && $0.isGatewayClass }
        if gateway.count >= maxGatewayClients {
            return RPCError(code: RPCError.limitReached, message: "too many gateway connections (limit \(maxGatewayClients))")
        }
        if let link, gateway.count(where: { $0.link?.id == link }) >= maxClientsPerLink {
            return RPCError(code: RPCError.limitReached, message: "too many connections of share link \(link) (limit \(maxClientsPerLink) per link)")
        }
        // Another uid's connection is counted among those not the owner's already.
        if client.credentials.uid == ownUID, notOwnersCount >= limits.maxClients - clientsKeptForOwner {
            return RPCError(code: RPCError.limitReached, message: "too many clients (limit \(limits.maxClients), \(clientsKeptForOwner) kept for the owner)")
        }
        return nil
    }

    private func startReading(_ client: ClientSession) {
        client.stream.startReading { [unowned self, unowned client] event in
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
                guard !client.isEnding else { return }
                // Past its bound, a client's further lines wait (at most the rest of this read)
                // and nothing more is read from it until it has room again: backpressure, as
                // Redis and ssh-agent do, instead of queueing without limit.
                if client.isReadingPaused {
                    client.deferLine(line)
                    return
                }
                handle(line: line, from: client)
                pauseIfOverBound(client)
            }
        } catch {
            let error = RPCError(code: RPCError.lineTooLong, message: "line too long: the limit is \(limits.maxLineBytes) bytes; closing the connection")
            client.send(RPC.response(id: .null, error: error))
            client.finish(reason: "line over \(limits.maxLineBytes) bytes")
        }
    }

    /// A quarter of the unread-output limit: past it a client is read no more until half of it
    /// is written; the limit itself, reached anyway, drops the client.
    private var outputBoundBytes: Int { max(limits.maxClientBufferBytes / 4, 1) }

    private func pauseIfOverBound(_ client: ClientSession) {
        guard !client.isReadingPaused, !client.isClosed,
              client.unanswered >= limits.maxUnansweredPerClient || client.unwrittenBytes > outputBoundBytes else { return }
        client.pauseReading(resumeAt: limits.maxUnansweredPerClient / 2, resumeAtBytes: outputBoundBytes / 2)
        logger.debug("client=\(client.id) paused: \(client.unanswered) requests unanswered, \(client.unwrittenBytes) bytes unwritten")
    }

    /// Called by the flusher once a paused client's unanswered requests are down to half the
    /// bound: the lines it deferred go first, then reading starts again.
    private func resumeReading(_ client: ClientSession) {
        guard client.isReadingPaused, !client.isClosed else { return }
        client.isReadingPaused = false
        while !client.isClosed, let line = client.takeDeferredLine() {
            handle(line: line[...], from: client)
            pauseIfOverBound(client)
            if client.isReadingPaused { return }
        }
        guard !client.isClosed else { return }
        startReading(client)
    }

    private func disconnected(_ client: ClientSession, reason: String?) {
        clients[client.id] = nil
        // Its work nobody will read goes: waiting searches, and the one running stops.
        let cancelled = cancelSearches(of: client.id)
        for conversationID in client.attached {
            guard let conversation = conversations[conversationID] else { continue }
            let quiet = conversation.isQuiet(client)
            if conversation.detach(client), !quiet {
                conversation.broadcast(.clientDetached(client.info))
            }
        }
        client.attached = []
        // Its unfinished uploads go, and the files it stored that no message names.
        client.uploads = [:]
        let stored = client.storedBlobs.keys
        client.storedBlobs = [:]
        collectBlobs(stored, why: "client=\(client.id) disconnected")
        let dropped = cancelled > 0 ? "; \(cancelled) search\(cancelled == 1 ? "" : "es") cancelled" : ""
        if let reason {
            logger.notice("client=\(client.id) disconnected: \(reason)\(dropped)")
        } else {
            logger.info("client=\(client.id) disconnected\(dropped)")
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
        replies.interruptAll(in: conversations.values)
        replies.abandonCompactions(in: conversations.values)
        abandonSearches()
        models.abandonAll(RPCError(code: RPCError.shuttingDown, message: "confabd is shutting down"))
        // Done once the clients have gone and every MCP server has exited (each bounded by
        // its stop's grace periods and SIGKILL).
        var waitingFor = 2
        let done = {
            waitingFor -= 1
            if waitingFor == 0 { done() }
        }
        replies.mcp.stopAll { done() }
        let goodbye = OutboundBuffer(ServerNotification.serverStopping(reason: reason).frame)
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

    /// Writes the index and closes every log.
    public func closeLogs() {
        store.close()
    }
}
