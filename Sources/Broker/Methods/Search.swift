import ConfabProtocol
import EventLoop
import LogStore
import Synchronization

/// `conversation.search`: every stored message, read from the logs on two threads of lower
/// priority (`Loop.runOnBackgroundThread`), so the loop keeps streaming meanwhile and keeps
/// its core when they compete, and libuv's thread pool stays free for the fdatasyncs that
/// every send and reply ending waits on. One search runs at a time, split in two halves: both
/// cores of a small machine, when they are idle.
extension Broker {
    static let searchWorkers = 2

    func search(_ params: SearchParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        let text = params.query
        guard text.utf8.count <= 1000 else { throw .invalidParams("parameter \"query\" must be at most 1000 bytes") }
        guard let query = SearchQuery(text) else { throw .invalidParams("parameter \"query\" must not be empty") }
        let limit = params.limit ?? 50
        var scope: String?
        if let id = params.conversation {
            guard ConversationID.isValid(id) else { throw .invalidParams("parameter \"conversation\" is not a conversation id") }
            // Not shared with another user: as if it did not exist.
            guard let conversation = conversations[id], permission(of: client, on: conversation) != nil else {
                throw .notFound("no conversation \(id)")
            }
            scope = id
        }
        // The logs to read are listed when the search starts, not now: a waiting search holds
        // only its query, however many conversations there are.
        let job = SearchJob(client: client.id, uid: client.credentials.uid, link: client.link, query: query, limit: limit, scope: scope, respond: respond)
        enqueue(job)
        logger.debug("search queued client=\(client.id) waiting=\(pendingSearches.count)")
        if runningSearch == nil { runNextSearch() }
    }

    /// A search waits, its user and its connection in the rotations.
    func enqueue(_ job: SearchJob) {
        pendingSearches.append(job)
        if !searchRotation.contains(job.uid) { searchRotation.append(job.uid) }
        if !(searchClientRotation[job.uid]?.contains(job.client) ?? false) { searchClientRotation[job.uid, default: []].append(job.client) }
    }

    /// The next search, taken from the users with searches waiting in turn, and within a user
    /// from its connections in turn: a user that sent a thousand, on one connection or on
    /// many, does not make another's one wait behind them all, nor does one connection make
    /// another of the same user wait.
    func takeNextSearch() -> SearchJob? {
        while let uid = searchRotation.first {
            searchRotation.removeFirst()
            var clients = searchClientRotation.removeValue(forKey: uid) ?? []
            var taken: SearchJob?
            while taken == nil, let client = clients.first {
                clients.removeFirst()
                guard let index = pendingSearches.firstIndex(where: { $0.uid == uid && $0.client == client }) else { continue }
                taken = pendingSearches.remove(at: index)
                if pendingSearches.contains(where: { $0.client == client }) { clients.append(client) }
            }
            if !clients.isEmpty {
                searchClientRotation[uid] = clients
                searchRotation.append(uid)
            }
            if let taken { return taken }
        }
        return nil
    }

    private func runNextSearch() {
        guard runningSearch == nil, let job = takeNextSearch() else { return }
        runningSearch = job
        let started = Self.monotonicMilliseconds
        // Another user searches only what is shared with it (checked again now: it may have
        // been unshared while the search waited).
        let scope = (job.scope.map { conversations[$0].map { [$0] } ?? [] } ?? Array(conversations.values))
            .filter { mayRead($0, job) }
        let logs = scope.map { LogSearch.Log(id: $0.id, path: $0.log.path, updated: $0.updated) }
        // Dealt in turn from the most recently written: each half holds as many recent logs as
        // the other, so both can stop early for a word found everywhere (see `LogSearch.search`).
        var halves = Array(repeating: [LogSearch.Log](), count: Self.searchWorkers)
        for (index, log) in logs.sorted(by: { $0.updated > $1.updated }).enumerated() {
            halves[index % Self.searchWorkers].append(log)
        }
        var results: [[SearchHit]] = []
        let query = job.query, limit = job.limit, cancellation = job.cancellation
        for half in halves {
            loop.runOnBackgroundThread({ LogSearch.search(half, for: query, limit: limit, isCancelled: { cancellation.isCancelled }) },
                                       done: { [unowned self] hits in
                results.append(hits)
                guard results.count == halves.count else { return }
                runningSearch = nil
                defer { runNextSearch() }
                // Its client left, or shutdown answered it already.
                guard !cancellation.isCancelled, !job.isAnswered else { return }
                var all = results.flatMap { $0 }
                LogSearch.keepNewest(&all, limit)
                let answer: [FoundMessage] = all.compactMap { hit in
                    // Deleted while the search ran: not a hit any more.
                    guard let conversation = conversations[hit.conversation] else { return nil }
                    // Unshared while the search ran: not the caller's to see any more.
                    guard mayRead(conversation, job) else { return nil }
                    return FoundMessage(conversation: hit.conversation, title: conversation.title, message: hit.message,
                                     role: hit.role, created: hit.created, snippet: hit.snippet)
                }
                logger.info("search client=\(job.client) logs=\(logs.count) hits=\(answer.count) ms=\(Self.monotonicMilliseconds - started)")
                job.answer(.success(SearchResult(hits: answer).json))
            })
        }
    }

    /// Whether the job's asker may read `conversation`: its owner, a user it is shared with, or
    /// the share link of that one conversation.
    private func mayRead(_ conversation: Conversation, _ job: SearchJob) -> Bool {
        let uidHas = Permission.of(job.uid, owner: ownUID, shares: conversation.log.shares)
        guard let link = job.link else { return uidHas != nil }
        return link.permission(on: conversation.id, uidHas: uidHas) != nil
    }

    /// A client left: its waiting searches go, and the one running, if it is one of its,
    /// stops at its next log. Returns how many were cancelled.
    func cancelSearches(of client: String) -> Int {
        let before = pendingSearches.count
        pendingSearches.removeAll { $0.client == client }
        for (uid, clients) in searchClientRotation where clients.contains(client) {
            let rest = clients.filter { $0 != client }
            searchClientRotation[uid] = rest.isEmpty ? nil : rest
        }
        searchRotation.removeAll { uid in !pendingSearches.contains { $0.uid == uid } }
        var cancelled = before - pendingSearches.count
        if let running = runningSearch, running.client == client, !running.cancellation.isCancelled {
            running.cancellation.cancel()
            cancelled += 1
        }
        return cancelled
    }
}

/// Set from the loop, read by the search threads between logs.
final class SearchCancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    func cancel() { flag.store(true, ordering: .relaxed) }
    var isCancelled: Bool { flag.load(ordering: .relaxed) }
}

final class SearchJob {
    let client: String
    /// Who asked: what it may see is checked when the search starts and when its hits come back.
    let uid: UInt32
    /// The share link it came through, which narrows what the uid may see.
    let link: LinkGrant?
    let query: SearchQuery
    let limit: Int
    /// One conversation's id, or nil for all of them.
    let scope: String?
    private let respond: Broker.Respond
    let cancellation = SearchCancellation()
    private(set) var isAnswered = false

    init(client: String, uid: UInt32, link: LinkGrant? = nil, query: SearchQuery, limit: Int, scope: String?, respond: Broker.Respond) {
        self.client = client
        self.uid = uid
        self.link = link
        self.query = query
        self.limit = limit
        self.scope = scope
        self.respond = respond
    }

    func answer(_ result: Result<JSON, RPCError>) {
        guard !isAnswered else { return }
        isAnswered = true
        respond(result)
    }
}

extension Broker {
    /// Shutdown: searches not answered yet are told so; one still running finishes on its
    /// threads, which the loop waits for when it closes.
    func abandonSearches() {
        let abandoned = (runningSearch.map { [$0] } ?? []) + pendingSearches
        pendingSearches = []
        searchRotation = []
        searchClientRotation = [:]
        for job in abandoned { job.answer(.failure(RPCError(code: RPCError.shuttingDown, message: "confabd is shutting down"))) }
    }
}
