import ConfabProtocol
import EventLoop
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// What loading found wrong, for the daemon's log.
public struct LoadProblem: Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int?
    public let message: String
    public var description: String { line.map { "\(file):\($0): \(message)" } ?? "\(file): \(message)" }
}

/// All conversation logs under one data directory, and the index of their summaries.
///
/// The index (`<directory>/index.jsonl`) lets start-up list every conversation without reading
/// its log: one line per log with its summary and the identity (size, inode, modification
/// time) the log had when the summary was taken. It is a cache, and the logs win: it is
/// written on the thread pool about a second after changes and at close, without fsync, into
/// a new file renamed over the old one. A log whose identity no longer matches its line, a log
/// with no line, and every log when the index is missing or unreadable, is read in full at
/// start-up with the same recovery as ever, and its line written anew.
public final class LogStore {
    public let directory: String
    public let conversationsDirectory: String
    public let indexPath: String
    /// The files user messages carry (`<directory>/blobs`).
    public let blobs: BlobStore
    let loop: Loop
    private let syncEnabled: Bool
    /// Every log, open or closed, by conversation id.
    var logs: [String: ConversationLog] = [:]
    var indexStale = false
    var indexWriteScheduled = false
    var indexWriteInFlight = false
    var indexTimer: Timer?
    var indexWrites = 0
    /// How long after a change the index is written again.
    public var indexDelayMilliseconds: UInt64 = 1000
    /// Told when a log's summary may have changed (written to, or read again), after the change.
    public var onLogChanged: (ConversationLog) -> Void = { _ in }
    /// Told when the index cannot be written (the logs are intact; the next start reads more).
    public var onIndexProblem: (String) -> Void = { _ in }

    /// Creates `<directory>/conversations` (mode 0700) if needed.
    public init(directory: String, loop: Loop, syncEnabled: Bool = true) throws(StoreError) {
        self.directory = directory
        self.conversationsDirectory = directory + "/conversations"
        self.indexPath = directory + "/index.jsonl"
        self.loop = loop
        self.syncEnabled = syncEnabled
        // A file-size limit (ulimit -f) must fail an append with EFBIG, not kill the daemon.
        signal(SIGXFSZ, SIG_IGN)
        do {
            // A new directory is on disk only once its parent's entry for it is: without the
            // parent's fsync a power cut could take the conversations directory, and every log
            // announced in it, away (`make powercut`).
            try Files.makeDirectories(conversationsDirectory, durable: syncEnabled)
        } catch {
            throw StoreError(errno: error.errno.code, operation: "\(error.operation) \(error.path)")
        }
        blobs = try BlobStore(dataDirectory: directory, loop: loop, syncEnabled: syncEnabled)
    }

    func path(of id: String) -> String {
        precondition(ConversationID.isValid(id), "conversation ids are validated before they reach the store")
        return conversationsDirectory + "/" + id + ".jsonl"
    }

    /// Creates a new log holding its header and `records` (a fork's copied messages), durable
    /// (file and directory entry) before `done`: all of it or, on failure, no file at all.
    public func create(_ header: ConversationHeader, records: [LogRecord] = [],
                       done: @escaping (Result<ConversationLog, StoreError>) -> Void) {
        let path = path(of: header.id)
        let fd: Int32
        do {
            fd = try Files.open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, mode: 0o600)
        } catch {
            done(.failure(StoreError(errno: error.code, operation: "create \(path)")))
            return
        }
        let log = ConversationLog(id: header.id, directory: conversationsDirectory, fd: fd, size: 0, summary: LogSummary(header: header),
                                  loop: loop, syncEnabled: syncEnabled)
        do {
            try log.write([.header(header)] + records, at: header.created)
        } catch {
            log.close()
            try? Files.remove(path)
            done(.failure(error))
            return
        }
        let directory = conversationsDirectory
        let syncEnabled = self.syncEnabled
        log.sync { [weak self, loop] error in
            if let error {
                log.close()
                try? Files.remove(path)
                done(.failure(error))
                return
            }
            guard syncEnabled else {
                self?.register(log)
                done(.success(log))
                return
            }
            loop.queueWork({ Self.syncDirectory(directory) }, done: { error in
                if let error {
                    // Not durable, so not created: leave nothing behind to reappear at restart.
                    log.close()
                    try? Files.remove(path)
                    done(.failure(error))
                } else {
                    self?.register(log)
                    done(.success(log))
                }
            })
        }
    }

    /// Removes a conversation's log; `done` runs once the removal is durable.
    public func delete(_ log: ConversationLog, done: @escaping (StoreError?) -> Void) {
        log.close()
        if logs[log.id] === log {
            logs[log.id] = nil
            indexChanged()
        }
        do {
            try Files.remove(log.path)
        } catch where error.code != ENOENT {
            done(StoreError(errno: error.code, operation: "unlink \(log.path)"))
            return
        } catch {}
        guard syncEnabled else {
            done(nil)
            return
        }
        let directory = conversationsDirectory
        loop.queueWork({ Self.syncDirectory(directory) }, done: done)
    }

    private static func syncDirectory(_ path: String) -> StoreError? {
        do {
            try Files.syncDirectory(path)
            return nil
        } catch {
            return StoreError(errno: error.errno.code, operation: "\(error.operation) \(error.path)")
        }
    }

    // MARK: - Start-up

    public struct Loaded {
        public var conversation: ReplayedConversation
        public var log: ConversationLog
    }

    /// What start-up found: every conversation's log, most of them closed with only their summary.
    public struct Opened {
        public struct Item {
            public let log: ConversationLog
            /// Boxed: a conversation is large, and ten thousand items without one should not
            /// each hold room for it.
            private let resumed: Resumed?
            /// Read in full and kept open: the conversation has replies to resume.
            public var conversation: ReplayedConversation? { resumed?.conversation }

            init(log: ConversationLog, conversation: ReplayedConversation?) {
                self.log = log
                resumed = conversation.map(Resumed.init)
            }
        }
        final class Resumed {
            let conversation: ReplayedConversation
            init(_ conversation: ReplayedConversation) { self.conversation = conversation }
        }
        /// Sorted by id.
        public var items: [Item] = []
        public var problems: [LoadProblem] = []
        /// Logs whose summary came from the index, unread.
        public var fromIndex = 0
        /// Logs read in full: new to the index, changed since it was written, or with work to resume.
        public var read = 0
        /// Why some of what is on disk is not among `items` although it is still there (the
        /// directory could not be listed, a log could not be opened or read, or was refused):
        /// what those logs name is unknown, so nothing may be judged unreferenced.
        public var notLoaded: [String] = []
    }

    /// Lists every conversation, reading only the logs the index cannot vouch for (see the type's
    /// comment) and those with replies to resume. Runs once at start-up, inline. `progress` is
    /// told how many of the logs to be read are read, before the first and after each.
    public func openConversations(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) -> Opened {
        var opened = Opened()
        removeUnfinishedIndexWrites()
        // The index is read and parsed on a thread of its own while this one lists and `stat`s
        // the logs; the two meet below.
        let indexPath = self.indexPath
        let indexRead = SideThread { Self.readIndex(at: indexPath) }
        let ids: [String]
        do {
            ids = try logIDs(problems: &opened.problems)
        } catch {
            opened.problems = indexRead.result().problems + opened.problems
            opened.problems.append(LoadProblem(file: conversationsDirectory, line: nil, message: "\(error)"))
            opened.notLoaded.append("cannot list \(conversationsDirectory): \(error)")
            return opened
        }
        let identities = Files.statuses(of: ids.map { $0 + ".jsonl" }, in: conversationsDirectory).map { $0.map(FileIdentity.init) }
        let (index, indexProblems) = indexRead.result()
        opened.problems = indexProblems + opened.problems
        // Both in id order: each log meets its entry, if it has one, walking the two together.
        var next = index.startIndex
        // In id order; the logs to read leave a hole where their item goes.
        var items: [Opened.Item?] = []
        items.reserveCapacity(ids.count)
        logs.reserveCapacity(ids.count)
        var toRead: [(id: String, position: Int)] = []
        for (id, identity) in zip(ids, identities) {
            while next < index.endIndex, index[next].summary.header.id < id { next += 1 }
            let entry = next < index.endIndex && index[next].summary.header.id == id ? index[next] : nil
            guard let entry, !entry.summary.needsResume, let identity,
                  identity == entry.identity, entry.identity.size > 0 else {
                toRead.append((id, items.count))
                items.append(nil)
                continue
            }
            let log = ConversationLog(id: id, directory: conversationsDirectory, fd: -1, size: off_t(entry.identity.size), summary: entry.summary,
                                      loop: loop, syncEnabled: syncEnabled)
            log.identity = entry.identity
            register(log, changesIndex: false)
            items.append(Opened.Item(log: log, conversation: nil))
        }
        opened.fromIndex = ids.count - toRead.count
        if opened.fromIndex != index.count { indexChanged() }
        progress(0, toRead.count)
        for (number, (id, position)) in toRead.enumerated() {
            if let loaded = load(id: id, problems: &opened.problems, outline: true) {
                if loaded.log.summary.needsResume {
                    items[position] = Opened.Item(log: loaded.log, conversation: loaded.conversation)
                } else {
                    loaded.log.close()
                    items[position] = Opened.Item(log: loaded.log, conversation: nil)
                }
            } else if Self.mayExist(path(of: id)) {
                // Refused but left in place (a log found empty or without one whole line is removed).
                opened.notLoaded.append("\(id).jsonl is on disk but did not load")
            }
            progress(number + 1, toRead.count)
        }
        opened.read = toRead.count
        opened.items = items.compactMap { $0 }
        return opened
    }

    /// False only when `path` is known to be gone.
    private static func mayExist(_ path: String) -> Bool {
        do {
            _ = try Files.status(path: path, followingLinks: false)
            return true
        } catch {
            return error.code != ENOENT
        }
    }

    func logIDs(problems: inout [LoadProblem]) throws(Errno) -> [String] {
        var ids: [String] = []
        for name in try Files.names(in: conversationsDirectory) {
            guard name.hasSuffix(".jsonl") else { continue }
            let id = String(name.dropLast(6))
            guard ConversationID.isValid(id) else {
                problems.append(LoadProblem(file: name, line: nil, message: "not a conversation log name; ignored"))
                continue
            }
            ids.append(id)
        }
        return ids.sorted()
    }


    /// Reads and settles one log; `outline` reads it for where its messages are, not for them
    /// (in full all the same when it has work to resume: start-up hands those over whole).
    func load(id: String, problems: inout [LoadProblem], outline: Bool = false) -> Loaded? {
        let read = Self.read(id: id, path: path(of: id), outline: outline ? .unlessResuming : .never)
        problems += read.problems
        guard let (log, conversation) = settle(read, into: nil, problems: &problems) else { return nil }
        return Loaded(conversation: conversation, log: log)
    }

    // MARK: - Reading one log

    /// A log as read and folded, before anything is done about what was found wrong.
    struct Read: Sendable {
        var id: String
        var path: String
        var fd: Int32 = -1
        var fileSize = 0
        /// Bytes up to the end of the last whole line.
        var goodSize = 0
        var conversation: ReplayedConversation?
        var problems: [LoadProblem] = []
    }

    /// Whether a read keeps the messages or only where they are (`StoredMessage`).
    enum Outline {
        case never, always
        /// Only where they are, unless the log has replies to resume.
        case unlessResuming
    }

    /// Opens, reads and folds a log. Touches nothing but the file, so it can run on the thread pool.
    static func read(id: String, path: String, outline: Outline = .never) -> Read {
        var result = Read(id: id, path: path)
        let fd: Int32
        do {
            fd = try Files.open(path, O_RDWR | O_APPEND)
        } catch {
            result.problems.append(LoadProblem(file: path, line: nil, message: "cannot open: \(error)"))
            return result
        }
        let bytes: [UInt8]
        do {
            bytes = try Files.readAll(fd)
        } catch {
            result.problems.append(LoadProblem(file: path, line: nil, message: "cannot read: \(error)"))
            Files.close(fd)
            return result
        }
        result.fd = fd
        result.fileSize = bytes.count
        if outline != .never {
            var problems: [LoadProblem] = []
            var goodSize = 0
            if case .outlined(let conversation) = Replay.outline(bytes, path: path, problems: &problems, goodSize: &goodSize),
               outline == .always || !conversation.summary.needsResume {
                result.problems += problems
                result.goodSize = goodSize
                result.conversation = conversation
                return result
            }
        }
        var records: [(record: LogRecord, at: Timestamp?)] = []
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            guard let newline = bytes[start...].firstIndex(of: 0x0A) else {
                result.problems.append(LoadProblem(file: path, line: lineNumber,
                    message: "torn last line (\(bytes.count - start) bytes, no newline): dropped"))
                break
            }
            let line = bytes[start..<newline]
            if let json = try? JSON.parse(line), let record = LogRecord(json: json) {
                records.append((record, json["at"]?.string.flatMap(Timestamp.init(rfc3339:))))
            } else {
                result.problems.append(LoadProblem(file: path, line: lineNumber, message: "unreadable record: skipped"))
            }
            start = newline + 1
            result.goodSize = start
        }
        result.conversation = Replay.fold(records)
        return result
    }

    /// Deals with what reading found, on the loop: removes an empty log, cuts a torn tail off,
    /// refuses a log without its header, and finishes replies left streaming as `interrupted`.
    /// Opens `existing` (a closed log being read again) or a new log; nil when the log is unusable.
    private func settle(_ read: Read, into existing: ConversationLog?,
                        problems: inout [LoadProblem]) -> (ConversationLog, ReplayedConversation)? {
        let path = read.path
        guard read.fd >= 0 else { return nil }
        if read.fileSize == 0 {
            // Created, then the daemon died before the header was written: never announced.
            problems.append(LoadProblem(file: path, line: nil, message: "empty log (a crash right after it was created): removed"))
            Files.close(read.fd)
            try? Files.remove(path)
            return nil
        }
        if read.goodSize == 0 {
            // Not one whole line: the header itself is torn (a power cut before its sync), and a
            // log is announced only once its header is synced. Otherwise it would be reported,
            // and ignored, at every start.
            problems.append(LoadProblem(file: path, line: nil,
                                        message: "no whole record (a power cut before its header was synced): removed"))
            Files.close(read.fd)
            try? Files.remove(path)
            return nil
        }
        if read.goodSize < read.fileSize {
            do {
                try Files.truncate(read.fd, to: Int64(read.goodSize))
            } catch {
                problems.append(LoadProblem(file: path, line: nil, message: "cannot cut torn tail: \(error)"))
            }
        }
        guard var conversation = read.conversation, conversation.header.id == read.id else {
            problems.append(LoadProblem(file: path, line: 1, message: "no valid header for \(read.id): log ignored"))
            Files.close(read.fd)
            return nil
        }
        let log: ConversationLog
        if let existing {
            log = existing
            log.reopen(fd: read.fd, size: off_t(read.goodSize), summary: conversation.summary)
        } else {
            log = ConversationLog(id: read.id, directory: conversationsDirectory, fd: read.fd, size: off_t(read.goodSize), summary: conversation.summary,
                                  loop: loop, syncEnabled: syncEnabled)
            register(log)
        }
        if !conversation.interruptedReplies.isEmpty {
            do {
                try log.write(conversation.interruptedReplies.map(LogRecord.replyFinished))
                if let error = log.syncNow() { throw error }
            } catch {
                problems.append(LoadProblem(file: path, line: nil, message: "cannot record interrupted replies: \(error)"))
            }
            conversation.interruptedReplies = []
        }
        if read.goodSize < read.fileSize { indexChanged() }
        return (log, conversation)
    }

    /// Reads a closed log again, on the thread pool, and opens it for appending. `done` runs on
    /// the loop with the conversation (its messages by where they are in the log, `stored`, save
    /// when the log had replies left streaming), or nil and what made the log unusable.
    public func read(_ log: ConversationLog, done: @escaping (_ conversation: ReplayedConversation?, _ problems: [LoadProblem]) -> Void) {
        let id = log.id, path = log.path
        loop.queueWork({ Self.read(id: id, path: path, outline: .always) }, done: { [weak self] read in
            guard let self else { return }
            var problems = read.problems
            let settled = settle(read, into: log, problems: &problems)
            done(settled?.1, problems)
        })
    }

    /// Closes a log whose conversation leaves memory; its summary stays for the list.
    public func unload(_ log: ConversationLog) { log.close() }

    private func register(_ log: ConversationLog, changesIndex: Bool = true) {
        logs[log.id] = log
        log.store = self
        if changesIndex { indexChanged() }
    }

    func changed(_ log: ConversationLog) {
        indexChanged()
        onLogChanged(log)
    }

    /// Writes the index if anything changed since it was last written, then closes every log.
    public func close() {
        indexTimer?.close()
        indexTimer = nil
        if indexStale || indexWriteInFlight || indexWriteScheduled, let error = writeIndexNow() {
            onIndexProblem("cannot write the index: \(error)")
        }
        indexWriteScheduled = false
        for log in logs.values { log.close() }
    }
}
