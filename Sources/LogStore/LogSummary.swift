import ConfabProtocol

/// What the conversation list needs of a conversation: its header (with the latest settings
/// folded in, so the index records them) and latest state. It is
/// folded record by record from the same records the log holds, by the same rules as
/// `Replay.fold`, so at any moment it says exactly what a full read of the log would.
public struct LogSummary: Equatable, Sendable {
    public var header: ConversationHeader
    public var title: String
    public var updated: Timestamp
    /// Distinct messages, as a full read would count them.
    public var messageCount: Int
    /// A reply left streaming, or a stored send whose reply never started: at start-up this
    /// conversation has work to resume, so it is read in full then.
    public var needsResume: Bool
    /// Tokens over every reply's latest ending (superseded ones included: they were paid for).
    public var usage = UsageTotals()
    /// Who else may see it, and how (`share`/`unshare` records, latest per uid), in uid order.
    public var shares: [ConversationShare] = []
    /// The blobs its messages' attachments name (superseded messages' too: they are still
    /// shown), so blobs nothing references can be found without reading any log.
    public var blobs: Set<String> = []
    /// What folding further records needs. Present only while the log is open for writing;
    /// a summary read from the index has none, and the log is folded afresh when it is opened.
    var fold: Fold?

    struct Fold: Equatable, Sendable {
        var messages: Set<String> = []
        var unfinishedReplies: Set<String> = []
        var lastReply = 0
        /// User messages after the last reply: their replies never started.
        var sendsAfterLastReply: [Int] = []
        /// Regenerated replies recorded and not started yet.
        var owedReplies: Set<String> = []
        /// Each reply's usage as its latest ending says, so an ending written again (a
        /// continued reply) replaces its part of the totals rather than adding to it.
        var replyUsage: [String: Usage] = [:]
    }

    /// A log holding only its header.
    public init(header: ConversationHeader) {
        self.header = header
        title = header.title
        updated = header.created
        messageCount = 0
        needsResume = false
        fold = Fold()
    }

    /// As the index recorded it.
    init(header: ConversationHeader, title: String, updated: Timestamp, messageCount: Int, needsResume: Bool, usage: UsageTotals,
         shares: [ConversationShare] = [], blobs: Set<String> = []) {
        self.shares = shares
        self.blobs = blobs
        self.header = header
        self.title = title
        self.updated = updated
        self.messageCount = messageCount
        self.needsResume = needsResume
        self.usage = usage
        fold = nil
    }

    /// Takes in one record written after everything folded so far.
    mutating func apply(_ record: LogRecord, at time: Timestamp?) {
        guard var fold else { preconditionFailure("a summary read from the index is folded afresh before its log is written") }
        // Taken out, not copied: with `self.fold` still holding them, the first insert below
        // would copy each set whole, for every record (quadratic in a long conversation).
        self.fold = nil
        if let time, time > updated { updated = time }
        switch record {
        case .header, .replyText, .replyReasoning, .compaction, .uncompaction: break
        case .title(let title): self.title = title
        case .settings(let settings): header.apply(settings)
        case .shared(let share): shares = shares.sharing(share)
        case .unshared(let uid): shares = shares.unsharing(uid)
        case .message(let message):
            Self.note(message, in: &fold)
            blobs.formUnion(message.attachmentDigests)
        case .replyStarted(let message):
            Self.note(message, in: &fold)
            fold.unfinishedReplies.insert(message.id)
        case .replyFinished(let message):
            Self.note(message, in: &fold)
            fold.unfinishedReplies.remove(message.id)
            if let old = fold.replyUsage[message.id] { usage.remove(old) }
            fold.replyUsage[message.id] = message.usage
            if let new = message.usage { usage.add(new) }
        case .superseded(let id, let by):
            if !fold.messages.contains(by), (MessageID.sequence(of: by) ?? 0) > fold.lastReply { fold.owedReplies.insert(by) }
            // A send replaced by an edit is not owed a reply any more.
            if let sequence = MessageID.sequence(of: id) { fold.sendsAfterLastReply.removeAll { $0 == sequence } }
        }
        messageCount = fold.messages.count
        needsResume = !fold.unfinishedReplies.isEmpty || !fold.sendsAfterLastReply.isEmpty || !fold.owedReplies.isEmpty
        self.fold = fold
    }

    private static func note(_ message: Message, in fold: inout Fold) {
        fold.messages.insert(message.id)
        fold.owedReplies.remove(message.id)
        let sequence = message.sequence
        if message.role == .assistant {
            if sequence > fold.lastReply {
                fold.lastReply = sequence
                fold.sendsAfterLastReply.removeAll { $0 <= sequence }
                fold.owedReplies = fold.owedReplies.filter { (MessageID.sequence(of: $0) ?? 0) > sequence }
            }
        } else if message.role == .user, sequence > fold.lastReply, !fold.sendsAfterLastReply.contains(sequence) {
            fold.sendsAfterLastReply.append(sequence)
        }
    }

    /// Drops the folding state of a log that is closed: it is rebuilt when the log is read again.
    mutating func forgetFold() { fold = nil }
}

/// A log file as `stat` saw it. The index records it next to each summary; at start-up a log
/// whose identity still matches has not changed since, so its summary stands. Logs are only
/// ever appended to or cut back, both of which change the size; the inode and modification
/// time catch a file replaced or edited by hand to the same length.
public struct FileIdentity: Equatable, Sendable {
    public var size: Int64
    public var inode: UInt64
    public var modifiedNanoseconds: Int64
}

extension ReplayedConversation {
    /// A conversation just created: its log holds only the header.
    public init(new header: ConversationHeader) {
        self.init(header: header, title: header.title, updated: header.created, messages: [], interruptedReplies: [],
                  summary: LogSummary(header: header))
    }
}

/// Token counts added up over a conversation's replies.
public struct UsageTotals: Equatable, Sendable {
    public var promptTokens = 0
    public var completionTokens = 0
    public var totalTokens = 0
    /// Replies whose usage confabd estimated (the upstream reported none).
    public var estimatedReplies = 0

    public init() {}

    public init(promptTokens: Int, completionTokens: Int, totalTokens: Int, estimatedReplies: Int) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.totalTokens = totalTokens
        self.estimatedReplies = estimatedReplies
    }

    mutating func add(_ usage: Usage) {
        promptTokens += usage.promptTokens
        completionTokens += usage.completionTokens
        totalTokens += usage.totalTokens
        if usage.isEstimated { estimatedReplies += 1 }
    }

    mutating func remove(_ usage: Usage) {
        promptTokens -= usage.promptTokens
        completionTokens -= usage.completionTokens
        totalTokens -= usage.totalTokens
        if usage.isEstimated { estimatedReplies -= 1 }
    }

    /// As the protocol shows it: a `Usage`, `estimated` when any part was.
    public var usage: Usage {
        Usage(promptTokens: promptTokens, completionTokens: completionTokens, totalTokens: totalTokens, isEstimated: estimatedReplies > 0)
    }
}
