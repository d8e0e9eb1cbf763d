import ConfabProtocol
import DaemonSettings
import LogStore

/// Tokens of some replies added up: what `usage.summary` keeps per conversation, provider,
/// model and hour, and prices when it answers.
struct UsageBucket: Equatable, Sendable {
    var replies = 0
    var promptTokens = 0
    /// Input billed at the full price (`Usage.uncachedPromptTokens`), summed reply by reply.
    var uncachedPromptTokens = 0
    var completionTokens = 0
    var reasoningTokens = 0
    var cacheReadTokens = 0
    var cacheWriteTokens = 0
    var estimatedReplies = 0

    mutating func add(_ usage: Usage) {
        replies += 1
        promptTokens += usage.promptTokens
        uncachedPromptTokens += usage.uncachedPromptTokens
        completionTokens += usage.completionTokens
        reasoningTokens += usage.reasoningTokens ?? 0
        cacheReadTokens += usage.cacheReadTokens ?? 0
        cacheWriteTokens += usage.cacheWriteTokens ?? 0
        if usage.isEstimated { estimatedReplies += 1 }
    }

    /// The tokens as one usage, for pricing: cost is linear in each count.
    var usage: Usage {
        Usage(promptTokens: promptTokens, completionTokens: completionTokens, totalTokens: promptTokens + completionTokens,
              cacheReadTokens: cacheReadTokens, cacheWriteTokens: max(0, promptTokens - uncachedPromptTokens - cacheReadTokens))
    }
}

struct UsageBucketKey: Hashable, Sendable {
    var provider: String
    var model: String
    /// Hours since the epoch (UTC) of when the replies were asked for.
    var hour: Int64

    static let hourMilliseconds: Int64 = 3_600_000
}

/// What `usage.summary` has summed of each conversation, valid while the conversation's log
/// has not been written since (`updated`): a conversation's log is read for its usage once per
/// change, not on every call. Per hour, not per reply, so it stays small however long the
/// conversations are (a few hundred bytes for each hour a conversation was used).
final class UsageLedger {
    struct Entry {
        var updated: Timestamp
        var buckets: [UsageBucketKey: UsageBucket]
    }
    var entries: [String: Entry] = [:]

    static func buckets(_ replies: [ReplyUsage]) -> [UsageBucketKey: UsageBucket] {
        var buckets: [UsageBucketKey: UsageBucket] = [:]
        for reply in replies {
            let key = UsageBucketKey(provider: reply.provider, model: reply.model,
                                     hour: floorDivide(reply.created.milliseconds, UsageBucketKey.hourMilliseconds))
            buckets[key, default: UsageBucket()].add(reply.usage)
        }
        return buckets
    }
}

func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
    let quotient = a / b
    return a % b != 0 && (a < 0) != (b < 0) ? quotient - 1 : quotient
}

/// `2026-11-27` for a count of days since 1970-01-01.
func civilDate(days: Int64) -> String {
    let (year, month, day) = Timestamp.civil(fromDays: days)
    func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return "\(year)-\(two(month))-\(two(day))"
}

extension UsageRow {
    /// Adds a bucket's replies, priced by `price` when there is one.
    mutating func add(_ bucket: UsageBucket, price: ModelPrice?) {
        replies += bucket.replies
        promptTokens += bucket.promptTokens
        completionTokens += bucket.completionTokens
        reasoningTokens += bucket.reasoningTokens
        cacheReadTokens += bucket.cacheReadTokens
        cacheWriteTokens += bucket.cacheWriteTokens
        estimatedReplies += bucket.estimatedReplies
        if let price { cost = (cost ?? 0) + price.cost(of: bucket.usage) } else { unpricedReplies += bucket.replies }
    }
}

/// `usage.summary`: the conversations in memory are summed from their messages; the others
/// from the ledger, or, when it has nothing for them since their last write, from their logs,
/// read on a background thread (only their `reply.finished` records are parsed) and kept in
/// the ledger. Prices are those of the settings in force when the answer is made, so a reload
/// reprices everything, past replies too.
extension Broker {
    func usageSummary(_ params: UsageParams, _ client: ClientSession, _ respond: Respond) throws(RPCError) {
        var scope: [Conversation]
        if let id = params.conversation {
            guard ConversationID.isValid(id) else { throw .invalidParams("parameter \"conversation\" is not a conversation id") }
            guard let conversation = conversations[id], permission(of: client, on: conversation) != nil else {
                throw .notFound("no conversation \(id)")
            }
            scope = [conversation]
        } else {
            // Every conversation is the owner's (the method is the owner's alone).
            scope = Array(conversations.values)
        }
        if params.by == .message, let conversation = scope.first {
            // Reply by reply: the conversation's messages themselves.
            whenReady(conversation, needsMessages: true) { [unowned self] error in
                if let error { return respond(.failure(error)) }
                do throws(RPCError) {
                    respond(.success(try messageRows(conversation, since: params.since).json))
                } catch {
                    respond(.failure(error))
                }
            }
            return
        }
        var pending: [(id: String, path: String, updated: Timestamp)] = []
        for conversation in scope where !conversation.isDeleted {
            // Loaded or not, a conversation's replies are read from its log off the loop: a loaded
            // one holds where its messages are, not their usage.
            if usageLedger.entries[conversation.id]?.updated != conversation.updated {
                pending.append((conversation.id, conversation.log.path, conversation.updated))
            }
        }
        let ids = scope.map(\.id)
        guard !pending.isEmpty else { return respond(.success(usageRows(ids, params).json)) }
        let started = Self.monotonicMilliseconds, toRead = pending
        loop.runOnBackgroundThread({ toRead.map { ($0.id, $0.updated, LogStore.replyUsages(path: $0.path)) } }, done: { [unowned self] read in
            for (id, updated, replies) in read {
                // Written to meanwhile: read again next time.
                guard let replies, conversations[id]?.updated == updated else { continue }
                usageLedger.entries[id] = UsageLedger.Entry(updated: updated, buckets: UsageLedger.buckets(replies))
            }
            logger.info("usage client=\(client.id) logs=\(toRead.count) ms=\(Self.monotonicMilliseconds - started)")
            respond(.success(usageRows(ids, params).json))
        })
    }

    /// The rows of `ids`' ledger entries, grouped as asked, priced now.
    private func usageRows(_ ids: [String], _ params: UsageParams) -> UsageResult {
        let prices = settings.prices
        let sinceHour = params.since.map { floorDivide($0.milliseconds, UsageBucketKey.hourMilliseconds) }
        var rows: [String: UsageRow] = [:]
        var total = UsageRow(key: "total")
        for id in ids {
            guard let entry = usageLedger.entries[id] else { continue }
            for (key, bucket) in entry.buckets {
                if let sinceHour, key.hour < sinceHour { continue }
                let price = prices.price(provider: key.provider, model: key.model)
                let rowKey = switch params.by {
                case .model: "\(key.provider)/\(key.model)"
                case .conversation, .message: id
                case .day: civilDate(days: floorDivide(key.hour, 24))
                }
                var row = rows[rowKey] ?? UsageRow(key: rowKey)
                if params.by == .conversation { row.title = conversations[id]?.title }
                row.add(bucket, price: price)
                rows[rowKey] = row
                total.add(bucket, price: price)
            }
        }
        let sorted = rows.values.sorted { a, b in
            if params.by == .day { return a.key < b.key }
            if (a.cost ?? 0) != (b.cost ?? 0) { return (a.cost ?? 0) > (b.cost ?? 0) }
            if a.promptTokens + a.completionTokens != b.promptTokens + b.completionTokens {
                return a.promptTokens + a.completionTokens > b.promptTokens + b.completionTokens
            }
            return a.key < b.key
        }
        return UsageResult(rows: sorted, total: total)
    }

    /// One row per reply of a conversation in memory, in message order.
    private func messageRows(_ conversation: Conversation, since: Timestamp?) throws(RPCError) -> UsageResult {
        let prices = settings.prices
        var rows: [UsageRow] = []
        var total = UsageRow(key: "total")
        let replies = ReplyUsage.of(try conversation.allMessages(), conversation: conversation.id, provider: conversation.provider, model: conversation.model)
        for reply in replies {
            if let since, reply.created < since { continue }
            let cost = prices.price(provider: reply.provider, model: reply.model)?.cost(of: reply.usage)
            var row = UsageRow(key: reply.message)
            row.add(reply.usage, cost: cost)
            rows.append(row)
            total.add(reply.usage, cost: cost)
        }
        return UsageResult(rows: rows, total: total)
    }
}
