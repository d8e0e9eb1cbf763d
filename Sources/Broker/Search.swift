import ConfabProtocol
import EventLoop
import LogStore

/// `conversation.search`: every stored message, read from the logs on libuv's thread pool so
/// the loop keeps streaming meanwhile. One search runs at a time, split in two halves of about
/// equal bytes: that uses both cores of a small machine and leaves the pool's other threads
/// free for the fdatasyncs that every send and reply ending waits on.
extension Broker {
    static let searchWorkers = 2

    func search(_ params: Params, _ respond: @escaping Respond) throws(RPCError) {
        let text = try params.string("query")
        guard text.utf8.count <= 1000 else { throw .invalidParams("parameter \"query\" must be at most 1000 bytes") }
        guard let query = SearchQuery(text) else { throw .invalidParams("parameter \"query\" must not be empty") }
        let limit = try params.optionalInt("limit", in: 1...1000) ?? 50
        var scope: [Conversation] = []
        if let id = try params.optionalString("conversation") {
            guard ConversationID.isValid(id) else { throw .invalidParams("parameter \"conversation\" is not a conversation id") }
            guard let conversation = conversations[id] else { throw .notFound("no conversation \(id)") }
            scope = [conversation]
        } else {
            scope = Array(conversations.values)
        }
        let job = SearchJob(query: query, limit: limit, logs: scope.map { ($0.id, $0.log.path, $0.log.byteCount) }, respond: respond)
        pendingSearches.append(job)
        if pendingSearches.count == 1 { runNextSearch() }
    }

    private func runNextSearch() {
        guard let job = pendingSearches.first else { return }
        let started = Self.monotonicMilliseconds
        // Largest first into the lighter half: halves of nearly equal bytes.
        var halves = Array(repeating: [(id: String, path: String)](), count: Self.searchWorkers)
        var weights = Array(repeating: Int64(0), count: Self.searchWorkers)
        for log in job.logs.sorted(by: { $0.bytes > $1.bytes }) {
            let lighter = weights.indices.min { weights[$0] < weights[$1] }!
            halves[lighter].append((log.id, log.path))
            weights[lighter] += log.bytes
        }
        var results: [[SearchHit]] = []
        let query = job.query, limit = job.limit
        for half in halves {
            loop.queueWork({ LogSearch.search(half, for: query, limit: limit) }, done: { [unowned self] hits in
                results.append(hits)
                guard results.count == halves.count else { return }
                var all = results.flatMap { $0 }
                LogSearch.keepNewest(&all, limit)
                let answer: [JSON] = all.compactMap { hit in
                    // Deleted while the search ran: not a hit any more.
                    guard let conversation = conversations[hit.conversation] else { return nil }
                    return ["conversation": .string(hit.conversation), "title": .string(conversation.title),
                            "message": .string(hit.message), "role": .string(hit.role.rawValue),
                            "created": .string(hit.created.description), "snippet": .string(hit.snippet)]
                }
                logger.info("search logs=\(job.logs.count) hits=\(answer.count) ms=\(Self.monotonicMilliseconds - started)")
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
    let logs: [(id: String, path: String, bytes: Int64)]
    let respond: Broker.Respond

    init(query: SearchQuery, limit: Int, logs: [(id: String, path: String, bytes: Int64)], respond: @escaping Broker.Respond) {
        self.query = query
        self.limit = limit
        self.logs = logs
        self.respond = respond
    }
}
