import ConfabProtocol
import EventLoop
import Posix
#if canImport(Glibc)
import Glibc
#endif

public struct StoreError: Error, CustomStringConvertible, Equatable, Sendable {
    public let errno: Int32
    public let operation: String
    public init(errno: Int32, operation: String) {
        self.errno = errno
        self.operation = operation
    }
    public var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}

/// One conversation's append-only log, `<data>/conversations/<id>.jsonl`.
///
/// Appends are written inline: a write(2) into the page cache costs microseconds and
/// keeps record order trivially right. Durability is fdatasync(2), which can take
/// milliseconds, so it runs on libuv's thread pool; requests that arrive while one is
/// in flight share the next one (group commit, as Redis's AOF does with appendfsync).
///
/// A log is open while its conversation is in memory. Closed, it still knows its summary (from
/// the index or from the last read) and where it is; reading it again opens it.
public final class ConversationLog {
    public let id: String
    /// The directory the log is in (one string shared by every log: start-up makes ten
    /// thousand of these, and a path each would be ten thousand strings built and kept).
    private let directory: String
    public var path: String { directory + "/" + id + ".jsonl" }
    private let loop: Loop
    private let syncEnabled: Bool
    private var fd: Int32
    /// Bytes known to hold whole records; a failed write is cut back to here.
    private var size: off_t
    /// Bytes the last successful sync covered, and the summary of those records: a failed
    /// sync cuts the log back to them (see `startSync`).
    private var syncedSize: off_t
    private var syncedSummary: LogSummary
    private var syncInFlight = false
    private var syncWaiters: [(StoreError?) -> Void] = []
    private var closeWhenIdle = false
    /// Exactly what the records written so far say, for the conversation list and the index.
    public private(set) var summary: LogSummary
    /// The summary's time and count alone: reading `summary` from another module copies the
    /// whole struct (strings, sets), which a sort of ten thousand conversations feels.
    public var updated: Timestamp { summary.updated }
    public var messageCount: Int { summary.messageCount }
    /// Who else may see the conversation (the summary's, without copying the rest of it).
    public var shares: [ConversationShare] { summary.shares }
    /// The file as last seen by `stat`; nil once written to since.
    var identity: FileIdentity?
    /// Told after every change, so the index is written again (a reference, not a closure:
    /// no allocation per log).
    weak var store: LogStore?

    init(id: String, directory: String, fd: Int32, size: off_t, summary: LogSummary, loop: Loop, syncEnabled: Bool) {
        self.id = id
        self.directory = directory
        self.fd = fd
        self.size = size
        self.summary = summary
        self.syncedSize = size
        self.syncedSummary = summary
        self.loop = loop
        self.syncEnabled = syncEnabled
    }

    public var isOpen: Bool { fd >= 0 }

    /// A sync is running on the thread pool: closing now would be deferred.
    public var isSyncing: Bool { syncInFlight }

    /// Bytes of whole records.
    public var byteCount: Int64 { Int64(size) }

    /// Takes a descriptor for the log just read; `summary` is what reading it folded.
    func reopen(fd: Int32, size: off_t, summary: LogSummary) {
        if isOpen {
            // Closing was deferred behind a sync that still uses the old descriptor: keep it.
            Glibc.close(fd)
        } else {
            self.fd = fd
        }
        self.size = size
        self.summary = summary
        syncedSize = size
        syncedSummary = summary
        closeWhenIdle = false
        identity = nil
        // Read again: its summary is what the file says now, whatever the last one said.
        store?.onLogChanged(self)
    }

    /// The file's current identity, for the index; nil if it cannot be seen.
    func currentIdentity() -> FileIdentity? {
        if let identity { return identity }
        var info = stat()
        let found = isOpen ? fstat(fd, &info) == 0 : stat(path, &info) == 0
        guard found else { return nil }
        let seen = FileIdentity(info)
        // The index must describe whole records only: a file longer than what we know holds
        // whole records (a write we are cutting back) is not recorded.
        guard seen.size == Int64(size) else { return nil }
        identity = seen
        return seen
    }

    /// Writes records now. A failed or short write leaves the file as it was.
    public func write(_ records: [LogRecord], at time: Timestamp = .now()) throws(StoreError) {
        guard fd >= 0 else { throw StoreError(errno: EBADF, operation: "append to \(path)") }
        var bytes: [UInt8] = []
        for record in records {
            record.json(at: time).write(into: &bytes)
            bytes.append(0x0A)
        }
        let (written, failure) = Files.writeAll(fd, bytes)
        if let failure {
            // Never leave half a record behind: the next append would glue onto it.
            if written > 0 { _ = ftruncate(fd, size) }
            throw StoreError(errno: failure, operation: "append to \(path)")
        }
        size += off_t(written)
        for record in records { summary.apply(record, at: time) }
        identity = nil
        store?.changed(self)
    }

    /// Calls `done` once everything written so far is on stable storage, always on a later
    /// loop turn (even with syncing off), so a caller never re-enters itself through it.
    public func sync(_ done: @escaping (StoreError?) -> Void) {
        guard syncEnabled else {
            loop.onNextTurn { done(nil) }
            return
        }
        if Self.announcesBeforeSync {
            // The ordering bug the power-cut simulator must catch: answer first, sync after.
            loop.onNextTurn { done(nil) }
            syncWaiters.append { _ in }
            if !syncInFlight { startSync() }
            return
        }
        syncWaiters.append(done)
        if !syncInFlight { startSync() }
    }

    #if DEBUG
    /// Test only, and only in debug builds: with `CONFAB_TEST_ONLY_ANNOUNCE_BEFORE_FDATASYNC`
    /// set, `sync` calls back before its fdatasync has run, so announcements go out for records
    /// not yet on stable storage. PowerCutTests sets it to show the simulator catches that;
    /// release builds never read it.
    static let announcesBeforeSync = getenv("CONFAB_TEST_ONLY_ANNOUNCE_BEFORE_FDATASYNC") != nil
    #else
    static let announcesBeforeSync = false
    #endif

    /// Write, then sync: the usual way to store something that will be announced.
    public func append(_ records: [LogRecord], durable done: @escaping (StoreError?) -> Void) {
        do {
            try write(records)
        } catch {
            loop.onNextTurn { done(error) }
            return
        }
        sync(done)
    }

    private func startSync() {
        syncInFlight = true
        var waiters = syncWaiters
        syncWaiters = []
        let fd = self.fd
        let path = self.path
        let coveredSize = size
        let coveredSummary = summary
        loop.queueWork({ () -> StoreError? in
            fdatasync(fd) == 0 ? nil : StoreError(errno: errno, operation: "fdatasync \(path)")
        }, done: { [self] error in
            syncInFlight = false
            if error != nil {
                // Every record since the last good sync was refused to whoever waits for it, and
                // the ones written during this sync would follow a refused one. Cut them all off:
                // otherwise the next sync that succeeds (or a restart) would bring a refused
                // message back. Linux may also have dropped the failed pages' error by then.
                if size > syncedSize, ftruncate(fd, syncedSize) == 0 {
                    size = syncedSize
                    summary = syncedSummary
                    identity = nil
                    waiters += syncWaiters
                    syncWaiters = []
                    store?.changed(self)
                }
            } else {
                syncedSize = coveredSize
                syncedSummary = coveredSummary
            }
            for waiter in waiters { waiter(error) }
            if !syncWaiters.isEmpty { startSync() }
            else if closeWhenIdle { closeNow() }
        })
    }

    /// Synchronous sync for shutdown, when blocking the loop no longer matters.
    public func syncNow() -> StoreError? {
        guard fd >= 0, syncEnabled else { return nil }
        return fdatasync(fd) == 0 ? nil : StoreError(errno: errno, operation: "fdatasync \(path)")
    }

    /// Closes the file once no sync is using the descriptor.
    public func close() {
        if syncInFlight { closeWhenIdle = true } else { closeNow() }
    }

    private func closeNow() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        closeWhenIdle = false
        summary.forgetFold()
    }
}

extension FileIdentity {
    init(_ info: stat) {
        self.init(size: Int64(info.st_size), inode: UInt64(info.st_ino),
                  modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }
}

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
    private let loop: Loop
    private let syncEnabled: Bool
    /// Every log, open or closed, by conversation id.
    private var logs: [String: ConversationLog] = [:]
    private var indexStale = false
    private var indexWriteScheduled = false
    private var indexWriteInFlight = false
    private var indexTimer: Timer?
    private var indexWrites = 0
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
        try Self.makeDirectories(conversationsDirectory, syncEnabled: syncEnabled)
    }

    /// Creates each missing directory of `path`. A new directory is on disk only once its
    /// parent's entry for it is: without the parent's fsync a power cut could take the
    /// conversations directory, and every log announced in it, away (`make powercut`).
    static func makeDirectories(_ path: String, syncEnabled: Bool) throws(StoreError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            let parent = current.isEmpty ? "/" : current
            current += "/" + component
            if mkdir(current, 0o700) == 0 {
                if syncEnabled, let error = syncDirectory(parent) { throw error }
            } else if errno != EEXIST {
                throw StoreError(errno: errno, operation: "mkdir \(current)")
            }
        }
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
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            done(.failure(StoreError(errno: errno, operation: "create \(path)")))
            return
        }
        let log = ConversationLog(id: header.id, directory: conversationsDirectory, fd: fd, size: 0, summary: LogSummary(header: header),
                                  loop: loop, syncEnabled: syncEnabled)
        do {
            try log.write([.header(header)] + records, at: header.created)
        } catch {
            log.close()
            unlink(path)
            done(.failure(error))
            return
        }
        let directory = conversationsDirectory
        let syncEnabled = self.syncEnabled
        log.sync { [weak self, loop] error in
            if let error {
                log.close()
                unlink(path)
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
                    unlink(path)
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
        guard unlink(log.path) == 0 || errno == ENOENT else {
            done(StoreError(errno: errno, operation: "unlink \(log.path)"))
            return
        }
        guard syncEnabled else {
            done(nil)
            return
        }
        let directory = conversationsDirectory
        loop.queueWork({ Self.syncDirectory(directory) }, done: done)
    }

    private static func syncDirectory(_ path: String) -> StoreError? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return StoreError(errno: errno, operation: "open \(path)") }
        defer { Glibc.close(fd) }
        return fsync(fd) == 0 ? nil : StoreError(errno: errno, operation: "fsync \(path)")
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
            return opened
        }
        var identities: [FileIdentity?] = []
        identities.reserveCapacity(ids.count)
        do {
            // Relative to the directory: one path lookup for it, not one per log.
            let directoryFD = open(conversationsDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if directoryFD >= 0 { Glibc.close(directoryFD) } }
            var info = stat()
            for id in ids {
                identities.append(fstatat(directoryFD, id + ".jsonl", &info, 0) == 0 ? FileIdentity(info) : nil)
            }
        }
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
            if let loaded = load(id: id, problems: &opened.problems) {
                if loaded.log.summary.needsResume {
                    items[position] = Opened.Item(log: loaded.log, conversation: loaded.conversation)
                } else {
                    loaded.log.close()
                    items[position] = Opened.Item(log: loaded.log, conversation: nil)
                }
            }
            progress(number + 1, toRead.count)
        }
        opened.read = toRead.count
        opened.items = items.compactMap { $0 }
        return opened
    }

    private func logIDs(problems: inout [LoadProblem]) throws(Errno) -> [String] {
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

    /// Reads every log in full, as start-up did before the index. A torn last line (a crash
    /// mid-append) is reported and cut off so the next append starts on a clean line; an
    /// unreadable line elsewhere is reported and skipped. Replies left streaming by a crash are
    /// finished as `interrupted`, durably. `progress` is told how many logs are read out of how
    /// many, before the first and after each.
    public func loadAll(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) -> (loaded: [Loaded], problems: [LoadProblem]) {
        var loaded: [Loaded] = []
        var problems: [LoadProblem] = []
        let ids: [String]
        do {
            ids = try logIDs(problems: &problems)
        } catch {
            problems.append(LoadProblem(file: conversationsDirectory, line: nil, message: "\(error)"))
            return ([], problems)
        }
        progress(0, ids.count)
        for (index, id) in ids.enumerated() {
            if let item = load(id: id, problems: &problems) { loaded.append(item) }
            progress(index + 1, ids.count)
        }
        return (loaded, problems)
    }

    private func load(id: String, problems: inout [LoadProblem]) -> Loaded? {
        let read = Self.read(id: id, path: path(of: id))
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

    /// Opens, reads and folds a log. Touches nothing but the file, so it can run on the thread pool.
    static func read(id: String, path: String) -> Read {
        var result = Read(id: id, path: path)
        let fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else {
            result.problems.append(LoadProblem(file: path, line: nil, message: "cannot open: \(String(cString: strerror(errno)))"))
            return result
        }
        let bytes: [UInt8]
        do {
            bytes = try Files.readAll(fd)
        } catch {
            result.problems.append(LoadProblem(file: path, line: nil, message: "cannot read: \(error)"))
            Glibc.close(fd)
            return result
        }
        result.fd = fd
        result.fileSize = bytes.count
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
            Glibc.close(read.fd)
            unlink(path)
            return nil
        }
        if read.goodSize == 0 {
            // Not one whole line: the header itself is torn (a power cut before its sync), and a
            // log is announced only once its header is synced. Otherwise it would be reported,
            // and ignored, at every start.
            problems.append(LoadProblem(file: path, line: nil,
                                        message: "no whole record (a power cut before its header was synced): removed"))
            Glibc.close(read.fd)
            unlink(path)
            return nil
        }
        if read.goodSize < read.fileSize, ftruncate(read.fd, off_t(read.goodSize)) != 0 {
            problems.append(LoadProblem(file: path, line: nil, message: "cannot cut torn tail: \(String(cString: strerror(errno)))"))
        }
        guard var conversation = read.conversation, conversation.header.id == read.id else {
            problems.append(LoadProblem(file: path, line: 1, message: "no valid header for \(read.id): log ignored"))
            Glibc.close(read.fd)
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
    /// the loop with the conversation, or nil and what made the log unusable.
    public func read(_ log: ConversationLog, done: @escaping (_ conversation: ReplayedConversation?, _ problems: [LoadProblem]) -> Void) {
        let id = log.id, path = log.path
        loop.queueWork({ Self.read(id: id, path: path) }, done: { [weak self] read in
            guard let self else { return }
            var problems = read.problems
            let settled = settle(read, into: log, problems: &problems)
            done(settled?.1, problems)
        })
    }

    /// Closes a log whose conversation leaves memory; its summary stays for the list.
    public func unload(_ log: ConversationLog) { log.close() }

    // MARK: - The index

    private func register(_ log: ConversationLog, changesIndex: Bool = true) {
        logs[log.id] = log
        log.store = self
        if changesIndex { indexChanged() }
    }

    func changed(_ log: ConversationLog) {
        indexChanged()
        onLogChanged(log)
    }

    private func indexChanged() {
        indexStale = true
        guard !indexWriteScheduled, !indexWriteInFlight else { return }
        indexWriteScheduled = true
        let timer = indexTimer ?? Timer(loop: loop)
        if indexTimer == nil {
            // The index is a cache: it must not keep a loop alive that has nothing else to do.
            timer.setKeepsLoopAlive(false)
            indexTimer = timer
        }
        timer.start(after: indexDelayMilliseconds) { [weak self] in self?.writeIndexInBackground() }
    }

    private func writeIndexInBackground() {
        indexWriteScheduled = false
        guard indexStale, !indexWriteInFlight else { return }
        indexStale = false
        indexWriteInFlight = true
        let entries = indexEntries()
        let path = indexPath
        indexWrites += 1
        let temporary = "\(indexPath).\(getpid()).\(indexWrites).tmp"
        loop.queueWork({ Self.writeIndex(entries, to: path, through: temporary) }, done: { [weak self] error in
            guard let self else { return }
            indexWriteInFlight = false
            if let error { onIndexProblem("cannot write the index: \(error)") }
            if indexStale {
                indexStale = false
                indexChanged()
            }
        })
    }

    /// Writes the index now, on this thread: for shutdown and tests.
    public func writeIndexNow() -> StoreError? {
        indexStale = false
        indexWrites += 1
        return Self.writeIndex(indexEntries(), to: indexPath, through: "\(indexPath).\(getpid()).\(indexWrites).tmp")
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

    struct IndexEntry: Equatable, Sendable {
        var identity: FileIdentity
        var summary: LogSummary
    }

    private func indexEntries() -> [IndexEntry] {
        logs.values.compactMap { log in
            log.currentIdentity().map { IndexEntry(identity: $0, summary: log.summary) }
        }
    }

    /// Each entry is an array in this order (cheaper to read than an object: no keys to hash),
    /// and the first line names the fields, so the file still reads on its own with `jq`.
    static let indexFields: [String] = ["id", "size", "inode", "mtime_ns", "created_ms", "model", "header_title", "title",
                                        "updated_ms", "message_count", "resume", "system", "forked_from", "provider", "usage",
                                        "profile", "params", "shared"]
    static let indexFormat: JSON = ["type": "confab-index", "v": 1, "fields": .array(indexFields.map(JSON.string))]

    static func encode(_ entry: IndexEntry) -> JSON {
        let summary = entry.summary
        return .array([
            .string(summary.header.id), .int(Int(entry.identity.size)), .int(Int(truncatingIfNeeded: entry.identity.inode)),
            .int(Int(entry.identity.modifiedNanoseconds)), .int(Int(summary.header.created.milliseconds)),
            .string(summary.header.model), .string(summary.header.title), .string(summary.title),
            .int(Int(summary.updated.milliseconds)), .int(summary.messageCount), .bool(summary.needsResume),
            summary.header.system.map(JSON.string) ?? .null,
            summary.header.forkedFrom?.json ?? .null,
            summary.header.provider.map(JSON.string) ?? .null,
            .array([.int(summary.usage.promptTokens), .int(summary.usage.completionTokens), .int(summary.usage.totalTokens),
                    .int(summary.usage.estimatedReplies)]),
            summary.header.profile.map(JSON.string) ?? .null,
            summary.header.params.json,
            .array(summary.shares.map(\.json)),
        ])
    }

    static func decode(_ json: JSON) -> IndexEntry? {
        guard case .array(let fields) = json, fields.count == indexFields.count,
              let id = fields[0].string, ConversationID.isValid(id), let size = fields[1].int, let inode = fields[2].int,
              let modified = fields[3].int, let created = fields[4].int, let model = fields[5].string,
              let headerTitle = fields[6].string, let title = fields[7].string,
              let updated = fields[8].int, let count = fields[9].int, count >= 0, let resume = fields[10].bool else { return nil }
        var system: String?
        if fields[11] != .null {
            guard let text = fields[11].string else { return nil }
            system = text
        }
        var forkedFrom: ForkOrigin?
        if fields[12] != .null {
            guard let origin = ForkOrigin(json: fields[12]) else { return nil }
            forkedFrom = origin
        }
        var provider: String?
        if fields[13] != .null {
            guard let name = fields[13].string else { return nil }
            provider = name
        }
        guard let usage = usageTotals(fields[14]) else { return nil }
        var profile: String?
        if fields[15] != .null {
            guard let name = fields[15].string else { return nil }
            profile = name
        }
        guard let params = try? SamplingParameters(json: fields[16]) else { return nil }
        guard let shares = Self.shares(fields[17]) else { return nil }
        let header = ConversationHeader(id: id, created: Timestamp(milliseconds: Int64(created)), title: headerTitle, model: model,
                                        system: system, forkedFrom: forkedFrom, provider: provider, profile: profile, params: params)
        return IndexEntry(identity: FileIdentity(size: Int64(size), inode: UInt64(truncatingIfNeeded: inode), modifiedNanoseconds: Int64(modified)),
                          summary: LogSummary(header: header, title: title, updated: Timestamp(milliseconds: Int64(updated)),
                                              messageCount: count, needsResume: resume, usage: usage, shares: shares))
    }

    /// One line of format, then one line per log, sorted by id; written whole to `temporary`
    /// and renamed over `path`, so a reader sees the old index or the new one.
    static func writeIndex(_ entries: [IndexEntry], to path: String, through temporary: String) -> StoreError? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.count * 256 + 64)
        indexFormat.write(into: &bytes)
        bytes.append(0x0A)
        for entry in entries.sorted(by: { $0.summary.header.id < $1.summary.header.id }) {
            encode(entry).write(into: &bytes)
            bytes.append(0x0A)
        }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return StoreError(errno: errno, operation: "create \(temporary)") }
        let failure = Files.writeAll(fd, bytes).failure
        Glibc.close(fd)
        if let failure {
            unlink(temporary)
            return StoreError(errno: failure, operation: "write \(temporary)")
        }
        guard rename(temporary, path) == 0 else {
            let error = StoreError(errno: errno, operation: "rename \(temporary)")
            unlink(temporary)
            return error
        }
        return nil
    }

    /// A daemon killed while writing the index leaves its temporary file behind.
    private func removeUnfinishedIndexWrites() {
        let prefix = String(indexPath.split(separator: "/").last ?? "index.jsonl") + "."
        guard let names = try? Files.names(in: directory) else { return }
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".tmp") {
            unlink(directory + "/" + name)
        }
    }

    /// The index's entries sorted by id, one per id (the last line wins); empty (everything is
    /// read) when it is missing or not ours. Unreadable lines are skipped: their logs are read.
    /// Touches nothing but the file, so start-up runs it on a thread of its own while the logs
    /// are listed and `stat`ed.
    static func readIndex(at indexPath: String) -> (entries: [IndexEntry], problems: [LoadProblem]) {
        var problems: [LoadProblem] = []
        let bytes: [UInt8]
        do {
            bytes = try readWholeFile(indexPath)
        } catch {
            if error.code != ENOENT {
                problems.append(LoadProblem(file: indexPath, line: nil, message: "cannot read the index (\(error)): reading every log"))
            }
            return ([], problems)
        }
        var entries: [IndexEntry] = []
        var sorted = true
        var unreadable = 0
        let known = bytes.withUnsafeBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            var start = 0
            var lineNumber = 0
            while start < buffer.count {
                let end = memchr(base + start, 0x0A, buffer.count - start).map { UnsafePointer<UInt8>($0.assumingMemoryBound(to: UInt8.self)) - base }
                    ?? buffer.count
                let line = UnsafeBufferPointer(rebasing: buffer[start..<end])
                start = end + 1
                lineNumber += 1
                if lineNumber == 1 {
                    guard let format = try? JSON.parse(line), format == Self.indexFormat else { return false }
                    // About 180 bytes a line: hashed once at its final size.
                    entries.reserveCapacity(buffer.count / 150)
                    continue
                }
                if line.isEmpty { continue }
                guard let entry = Self.decode(line: line) else {
                    unreadable += 1
                    continue
                }
                // The index is written in id order; anything else (an edit by hand) is sorted below.
                if let last = entries.last, last.summary.header.id >= entry.summary.header.id { sorted = false }
                entries.append(entry)
            }
            return lineNumber > 0
        }
        guard known else {
            problems.append(LoadProblem(file: indexPath, line: 1, message: "not an index this version reads: reading every log"))
            return ([], problems)
        }
        if !sorted {
            var byID: [String: IndexEntry] = [:]
            for entry in entries { byID[entry.summary.header.id] = entry }
            entries = byID.values.sorted { $0.summary.header.id < $1.summary.header.id }
        }
        if unreadable > 0 {
            problems.append(LoadProblem(file: indexPath, line: nil, message: "\(unreadable) unreadable lines: their logs are read"))
        }
        return (entries, problems)
    }

    /// A file read with one buffer of its size (the index is megabytes: growing an array
    /// chunk by chunk would copy it over and over).
    private static func readWholeFile(_ path: String) throws(Errno) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Errno.current }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Errno.current }
        let expected = Int(info.st_size)
        var failure: Int32?
        var bytes = [UInt8](unsafeUninitializedCapacity: expected + 1) { buffer, count in
            while count < buffer.count {
                let n = Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if n == 0 { return }
                count += n
            }
        }
        if let failure { throw Errno(failure) }
        if bytes.count > expected {
            // Grew while being read: take the rest too.
            bytes += try Files.readAll(fd)
        }
        return bytes
    }

    /// One line of the index as `decode(JSON.parse(line))` reads it, straight from the bytes:
    /// no tree of values is built for the fields that are plain strings, numbers and nulls.
    static func decode(line: UnsafeBufferPointer<UInt8>) -> IndexEntry? {
        struct Fields {
            var count = 0
            var valid = true
            var id = "", model = "", headerTitle = "", title = ""
            var size = 0, inode = 0, modified = 0, created = 0, updated = 0, messages = 0
            var resume = false
            var system: String?, provider: String?, profile: String?
            var forkedFrom: ForkOrigin?
            var usage = UsageTotals()
            var params = SamplingParameters()
            var shares: [ConversationShare] = []
        }
        func string(_ scanner: inout JSONScanner, _ valid: inout Bool) throws(JSONParseError) -> String {
            guard let text = try scanner.readString() else {
                valid = false
                return ""
            }
            return text
        }
        func int(_ scanner: inout JSONScanner, _ valid: inout Bool) throws(JSONParseError) -> Int {
            guard let value = try scanner.readInt() else {
                valid = false
                return 0
            }
            return value
        }
        func optionalString(_ scanner: inout JSONScanner, _ valid: inout Bool) throws(JSONParseError) -> String? {
            if try scanner.readNull() { return nil }
            return try string(&scanner, &valid)
        }
        let read = try? JSONScanner.read(line) { (scanner) throws(JSONParseError) -> Fields in
            var f = Fields()
            guard try scanner.kind() == .array else {
                f.valid = false
                try scanner.skipValue()
                return f
            }
            try scanner.elements { (index, scanner) throws(JSONParseError) in
                f.count = index + 1
                guard f.valid else { return }
                switch index {
                case 0: f.id = try string(&scanner, &f.valid)
                case 1: f.size = try int(&scanner, &f.valid)
                case 2: f.inode = try int(&scanner, &f.valid)
                case 3: f.modified = try int(&scanner, &f.valid)
                case 4: f.created = try int(&scanner, &f.valid)
                case 5: f.model = try string(&scanner, &f.valid)
                case 6: f.headerTitle = try string(&scanner, &f.valid)
                case 7: f.title = try string(&scanner, &f.valid)
                case 8: f.updated = try int(&scanner, &f.valid)
                case 9: f.messages = try int(&scanner, &f.valid)
                case 10:
                    guard let resume = try scanner.readValue().bool else {
                        f.valid = false
                        return
                    }
                    f.resume = resume
                case 11: f.system = try optionalString(&scanner, &f.valid)
                case 12:
                    if try scanner.readNull() { return }
                    guard let origin = ForkOrigin(json: try scanner.readValue()) else {
                        f.valid = false
                        return
                    }
                    f.forkedFrom = origin
                case 13: f.provider = try optionalString(&scanner, &f.valid)
                case 14:
                    guard let usage = Self.usageTotals(try scanner.readValue()) else {
                        f.valid = false
                        return
                    }
                    f.usage = usage
                case 15: f.profile = try optionalString(&scanner, &f.valid)
                case 16:
                    guard let params = try? SamplingParameters(json: try scanner.readValue()) else {
                        f.valid = false
                        return
                    }
                    f.params = params
                case 17:
                    guard let shares = Self.shares(try scanner.readValue()) else {
                        f.valid = false
                        return
                    }
                    f.shares = shares
                default: f.valid = false
                }
            }
            return f
        }
        guard let f = read, f.valid, f.count == indexFields.count, ConversationID.isValid(f.id), f.messages >= 0 else { return nil }
        let header = ConversationHeader(id: f.id, created: Timestamp(milliseconds: Int64(f.created)), title: f.headerTitle, model: f.model,
                                        system: f.system, forkedFrom: f.forkedFrom, provider: f.provider, profile: f.profile, params: f.params)
        return IndexEntry(identity: FileIdentity(size: Int64(f.size), inode: UInt64(truncatingIfNeeded: f.inode), modifiedNanoseconds: Int64(f.modified)),
                          summary: LogSummary(header: header, title: f.title, updated: Timestamp(milliseconds: Int64(f.updated)),
                                              messageCount: f.messages, needsResume: f.resume, usage: f.usage, shares: f.shares))
    }

    /// The `shared` field: every entry a whole share, or the line is not taken.
    static func shares(_ json: JSON) -> [ConversationShare]? {
        guard case .array(let items) = json else { return nil }
        var shares: [ConversationShare] = []
        for item in items {
            guard let share = ConversationShare(json: item) else { return nil }
            shares.append(share)
        }
        return shares
    }

    static func usageTotals(_ json: JSON) -> UsageTotals? {
        guard case .array(let counts) = json, counts.count == 4, let prompt = counts[0].int, let completion = counts[1].int,
              let total = counts[2].int, let estimated = counts[3].int else { return nil }
        return UsageTotals(promptTokens: prompt, completionTokens: completion, totalTokens: total, estimatedReplies: estimated)
    }
}
