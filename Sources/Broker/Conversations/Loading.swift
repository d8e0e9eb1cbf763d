import ConfabProtocol
import EventLoop
import LogStore
#if canImport(Glibc)
import Glibc
#endif

/// Conversations come into memory when first needed and leave it when idle: start-up reads only
/// summaries, so its cost and the daemon's memory do not grow with the history on disk.
extension Broker {
    /// Whether a request can act on the conversation now: nothing is being read for it, and its
    /// messages are in memory if the request needs them.
    func isReady(_ conversation: Conversation, needsMessages: Bool) -> Bool {
        switch conversation.contents {
        case .inMemory: return conversation.waitingForMessages.isEmpty
        case .onDisk: return !needsMessages
        case .loading: return false
        }
    }

    /// Calls `resume` with nil once the conversation is ready for the request (at once when it
    /// is), reading its log first if needed; with the error when its messages cannot be read.
    /// Requests that wait are resumed in the order they came.
    func whenReady(_ conversation: Conversation, needsMessages: Bool, _ resume: @escaping (RPCError?) -> Void) {
        conversation.lastUsed = loop.now
        if isReady(conversation, needsMessages: needsMessages) {
            resume(nil)
            return
        }
        conversation.waitingForMessages.append((needsMessages, resume))
        if conversation.contents == .onDisk { read(conversation) }
    }

    /// As `whenReady` for a conversation whose messages are not in memory, but its log is read
    /// only once `first` has called back (the first page read from the log's end, which then
    /// does not share the machine with the whole log's read). Requests that come meanwhile wait
    /// behind `resume`, as they would behind the read.
    func whenReady(_ conversation: Conversation, after first: (_ then: @escaping () -> Void) -> Void,
                   _ resume: @escaping (RPCError?) -> Void) {
        precondition(conversation.contents == .onDisk)
        conversation.lastUsed = loop.now
        conversation.waitingForMessages.append((true, resume))
        conversation.startLoading()
        first { [unowned self] in read(conversation, started: true) }
    }

    /// Reads the log on the thread pool: a long conversation's log takes milliseconds to parse,
    /// which would otherwise stall every other client and reply for that long.
    private func read(_ conversation: Conversation, started: Bool = false) {
        if !started { conversation.startLoading() }
        store.read(conversation.log) { [unowned self] replayed, problems in
            for problem in problems { logger.warning("log problem: \(problem)") }
            var failure: RPCError?
            if let replayed {
                conversation.take(replayed)
                logger.debug("conversation=\(conversation.id) read: \(replayed.messages.count + replayed.stored.count) messages")
            } else {
                conversation.loadFailed()
                let reason = problems.last.map { "\($0)" } ?? "unknown"
                logger.error("conversation=\(conversation.id) cannot read its log: \(reason)")
                failure = RPCError(code: RPCError.storageFailed, message: "storage failed: cannot read the conversation's log: \(reason)")
            }
            let waiting = conversation.waitingForMessages
            conversation.waitingForMessages = []
            for (needsMessages, resume) in waiting { resume(needsMessages ? failure : nil) }
            // Resumed requests might have left it idle; the sweep will see to it.
        }
    }

    /// Lets conversations nobody has touched for `idleMilliseconds` leave memory. Runs on a timer.
    func unloadIdle(idleMilliseconds: UInt64) {
        let now = loop.now
        var count = 0
        for conversation in conversations.values where conversation.isIdle && now - conversation.lastUsed >= idleMilliseconds {
            conversation.unload()
            store.unload(conversation.log)
            count += 1
        }
        if count > 0 { logger.debug("\(count) idle conversations left memory") }
    }

    static var monotonicMilliseconds: UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    /// Starts the sweep that unloads idle conversations.
    func startUnloadingIdle(every milliseconds: UInt64) {
        let timer = Timer(loop: loop)
        timer.setKeepsLoopAlive(false)
        timer.start(after: milliseconds, repeat: milliseconds) { [unowned self] in unloadIdle(idleMilliseconds: milliseconds) }
    }
}
