import ConfabProtocol
import EventLoop
import LogStore

/// `conversation.search`: every stored message, read from the logs on two threads of lower
/// priority (`Loop.runOnBackgroundThread`), so the loop keeps streaming meanwhile and keeps
/// its core when they compete, and libuv's thread pool stays free for the fdatasyncs that
/// every send and reply ending waits on. One search runs at a time, split in two halves: both
/// cores of a small machine, when they are idle.
extension Broker {
    static let searchWorkers = 2

    func search(_ params: Params, _ client: ClientSession, _ respond: @escaping Respond) throws(RPCError) {
        try refuseWhenStopping()
        let text = try params.string("query")
        guard text.utf8.count <= 1000 else { throw .invalidParams("parameter \"query\" must be at most 1000 bytes") }
        guard let query = SearchQuery(text) else { throw .invalidParams("parameter \"query\" must not be empty") }
        let limit = try params.optionalInt("limit", in: 1...1000) ?? 50
        var scope: [Conversation] = []
        if let id = try params.optionalString("conversation") {
            guard ConversationID.isValid(id) else { throw .invalidParams("parameter \"conversation\" is not a conversation id") }
            guard let conversation = conversations[id], permission(of: client, on: conversation) != nil else {
                throw .notFound("no conversation \(id)")
            }
            scope = [conversation]
        } else if client.credentials.uid == ownUID {
            scope = Array(conversations.values)
        } else {
            // Another user searches only what is shared with it.
            scope = conversations.values.filter { permission(of: client, on: $0) != nil }
        }
        let job = SearchJob(query: query, limit: limit, client: client, respond: respond,
                            logs: scope.map { LogSearch.Log(id: $0.id, path: $0.log.path, updated: $0.updated) })
        pendingSearches.append(job)
        if pendingSearches.count == 1 { runNextSearch() }
    }

    private func runNextSearch() {
        guard let job = pendingSearches.first else { return }
        let started = Self.monotonicMilliseconds
        // Dealt in turn from the most recently written: each half holds as many recent logs as
        // the other, so both can stop early for a word found everywhere (see `LogSearch.search`).
        var halves = Array(repeating: [LogSearch.Log](), count: Self.searchWorkers)
        for (index, log) in job.logs.sorted(by: { $0.updated > $1.updated }).enumerated() {
            halves[index % Self.searchWorkers].append(log)
        }
        var results: [[SearchHit]] = []
        let query = job.query, limit = job.limit
        for half in halves {
            loop.runOnBackgroundThread({ LogSearch.search(half, for: query, limit: limit) }, done: { [unowned self] hits in
                results.append(hits)
                guard results.count == halves.count else { return }
                var all = results.flatMap { $0 }
                LogSearch.keepNewest(&all, limit)
                let answer: [JSON] = all.compactMap { hit in
                    // Deleted while the search ran: not a hit any more.
                    guard let conversation = conversations[hit.conversation] else { return nil }
                    // Unshared while the search ran: not the caller's to see any more.
                    guard permission(of: job.client, on: conversation) != nil else { return nil }
                    return ["conversation": .string(hit.conversation), "title": .string(conversation.title),
                            "message": .string(hit.message), "role": .string(hit.role.rawValue),
                            "created": .string(hit.created.description), "snippet": .string(hit.snippet)]
                }
                logger.info("search logs=\(job.logs.count) hits=\(answer.count) ms=\(Self.monotonicMilliseconds - started)")
                // Shutdown may have answered it already.
                guard pendingSearches.first === job else { return }
                job.respond(.success(["hits": .array(answer)]))
                pendingSearches.removeFirst()
                runNextSearch()
            })
        }
    }
}

final class SearchJob {
    let query: SearchQuery
    let limit: Int
    let logs: [LogSearch.Log]
    /// Who asked: the hits are checked against what it may see when they come back.
    let client: ClientSession
    let respond: Broker.Respond

    init(query: SearchQuery, limit: Int, client: ClientSession, respond: @escaping Broker.Respond, logs: [LogSearch.Log]) {
        self.client = client
        self.query = query
        self.limit = limit
        self.logs = logs
        self.respond = respond
    }
}

extension Broker {
    /// Shutdown: searches not answered yet are told so; one still running finishes on its
    /// threads, which the loop waits for when it closes.
    func abandonSearches() {
        let abandoned = pendingSearches
        pendingSearches = []
        for job in abandoned { job.respond(.failure(RPCError(code: RPCError.shuttingDown, message: "confabd is shutting down"))) }
    }
}
