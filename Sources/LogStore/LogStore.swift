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
public final class ConversationLog {
    public let id: String
    public let path: String
    private let loop: Loop
    private let syncEnabled: Bool
    private var fd: Int32
    /// Bytes known to hold whole records; a failed write is cut back to here.
    private var size: off_t
    private var syncInFlight = false
    private var syncWaiters: [(StoreError?) -> Void] = []
    private var closeWhenIdle = false

    init(id: String, path: String, fd: Int32, size: off_t, loop: Loop, syncEnabled: Bool) {
        self.id = id
        self.path = path
        self.fd = fd
        self.size = size
        self.loop = loop
        self.syncEnabled = syncEnabled
    }

    /// Writes records now. A failed or short write leaves the file as it was.
    public func write(_ records: [LogRecord], at time: Timestamp = .now()) throws(StoreError) {
        guard fd >= 0 else { throw StoreError(errno: EBADF, operation: "append to \(path)") }
        var bytes: [UInt8] = []
        for record in records {
            record.json(at: time).write(into: &bytes)
            bytes.append(0x0A)
        }
        var written = 0
        let failure: Int32? = bytes.withUnsafeBytes { raw in
            while written < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if n == 0 { return EIO }
                written += n
            }
            return nil
        }
        if let failure {
            // Never leave half a record behind: the next append would glue onto it.
            if written > 0 { _ = ftruncate(fd, size) }
            throw StoreError(errno: failure, operation: "append to \(path)")
        }
        size += off_t(written)
    }

    /// Calls `done` once everything written so far is on stable storage, always on a later
    /// loop turn (even with syncing off), so a caller never re-enters itself through it.
    public func sync(_ done: @escaping (StoreError?) -> Void) {
        guard syncEnabled else {
            loop.onNextTurn { done(nil) }
            return
        }
        syncWaiters.append(done)
        if !syncInFlight { startSync() }
    }

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
        let waiters = syncWaiters
        syncWaiters = []
        let fd = self.fd
        let path = self.path
        loop.queueWork({ () -> StoreError? in
            fdatasync(fd) == 0 ? nil : StoreError(errno: errno, operation: "fdatasync \(path)")
        }, done: { [self] error in
            syncInFlight = false
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
    }
}

/// What loading found wrong, for the daemon's log.
public struct LoadProblem: Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int?
    public let message: String
    public var description: String { line.map { "\(file):\($0): \(message)" } ?? "\(file): \(message)" }
}

/// All conversation logs under one data directory.
public final class LogStore {
    public let directory: String
    public let conversationsDirectory: String
    private let loop: Loop
    private let syncEnabled: Bool

    /// Creates `<directory>/conversations` (mode 0700) if needed.
    public init(directory: String, loop: Loop, syncEnabled: Bool = true) throws(StoreError) {
        self.directory = directory
        self.conversationsDirectory = directory + "/conversations"
        self.loop = loop
        self.syncEnabled = syncEnabled
        // A file-size limit (ulimit -f) must fail an append with EFBIG, not kill the daemon.
        signal(SIGXFSZ, SIG_IGN)
        try Self.makeDirectories(conversationsDirectory)
    }

    static func makeDirectories(_ path: String) throws(StoreError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                throw StoreError(errno: errno, operation: "mkdir \(current)")
            }
        }
    }

    func path(of id: String) -> String {
        precondition(ConversationID.isValid(id), "conversation ids are validated before they reach the store")
        return conversationsDirectory + "/" + id + ".jsonl"
    }

    /// Creates a new log holding just its header, durable (file and directory entry) before `done`.
    public func create(_ header: ConversationHeader, done: @escaping (Result<ConversationLog, StoreError>) -> Void) {
        let path = path(of: header.id)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            done(.failure(StoreError(errno: errno, operation: "create \(path)")))
            return
        }
        let log = ConversationLog(id: header.id, path: path, fd: fd, size: 0, loop: loop, syncEnabled: syncEnabled)
        do {
            try log.write([.header(header)], at: header.created)
        } catch {
            log.close()
            unlink(path)
            done(.failure(error))
            return
        }
        let directory = conversationsDirectory
        let syncEnabled = self.syncEnabled
        log.sync { [loop] error in
            if let error {
                log.close()
                unlink(path)
                done(.failure(error))
                return
            }
            guard syncEnabled else {
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
                    done(.success(log))
                }
            })
        }
    }

    /// Removes a conversation's log; `done` runs once the removal is durable.
    public func delete(_ log: ConversationLog, done: @escaping (StoreError?) -> Void) {
        log.close()
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

    public struct Loaded {
        public var conversation: ReplayedConversation
        public var log: ConversationLog
    }

    /// Reads every log. Runs once at start-up, before the daemon takes clients, so it reads
    /// inline. A torn last line (a crash mid-append) is reported and cut off so the next
    /// append starts on a clean line; an unreadable line elsewhere is reported and skipped.
    /// Replies left streaming by a crash are finished as `interrupted`, durably.
    /// `progress` is told how many logs are read out of how many, before the first and after each.
    public func loadAll(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) -> (loaded: [Loaded], problems: [LoadProblem]) {
        var loaded: [Loaded] = []
        var problems: [LoadProblem] = []
        let entries: [String]
        do {
            entries = try Files.names(in: conversationsDirectory)
        } catch {
            problems.append(LoadProblem(file: conversationsDirectory, line: nil, message: "\(error)"))
            return ([], problems)
        }
        var names: [String] = []
        for name in entries {
            guard name.hasSuffix(".jsonl") else { continue }
            let id = String(name.dropLast(6))
            guard ConversationID.isValid(id) else {
                problems.append(LoadProblem(file: name, line: nil, message: "not a conversation log name; ignored"))
                continue
            }
            names.append(id)
        }
        let sorted = names.sorted()
        progress(0, sorted.count)
        for (index, id) in sorted.enumerated() {
            switch load(id: id, problems: &problems) {
            case .some(let item): loaded.append(item)
            case .none: break
            }
            progress(index + 1, sorted.count)
        }
        return (loaded, problems)
    }

    private func load(id: String, problems: inout [LoadProblem]) -> Loaded? {
        let path = path(of: id)
        let fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else {
            problems.append(LoadProblem(file: path, line: nil, message: "cannot open: \(String(cString: strerror(errno)))"))
            return nil
        }
        let bytes: [UInt8]
        do {
            bytes = try Files.readAll(fd)
        } catch {
            problems.append(LoadProblem(file: path, line: nil, message: "cannot read: \(error)"))
            Glibc.close(fd)
            return nil
        }
        if bytes.isEmpty {
            // Created, then the daemon died before the header was written: never announced.
            problems.append(LoadProblem(file: path, line: nil, message: "empty log (a crash right after it was created): removed"))
            Glibc.close(fd)
            unlink(path)
            return nil
        }
        var records: [(record: LogRecord, at: Timestamp?)] = []
        var goodSize = 0
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            guard let newline = bytes[start...].firstIndex(of: 0x0A) else {
                problems.append(LoadProblem(file: path, line: lineNumber,
                    message: "torn last line (\(bytes.count - start) bytes, no newline): dropped"))
                break
            }
            let line = bytes[start..<newline]
            if let json = try? JSON.parse(line), let record = LogRecord(json: json) {
                records.append((record, json["at"]?.string.flatMap(Timestamp.init(rfc3339:))))
            } else {
                problems.append(LoadProblem(file: path, line: lineNumber, message: "unreadable record: skipped"))
            }
            start = newline + 1
            goodSize = start
        }
        if goodSize < bytes.count, ftruncate(fd, off_t(goodSize)) != 0 {
            problems.append(LoadProblem(file: path, line: nil, message: "cannot cut torn tail: \(String(cString: strerror(errno)))"))
        }
        guard var conversation = Replay.fold(records), conversation.header.id == id else {
            problems.append(LoadProblem(file: path, line: 1, message: "no valid header for \(id): log ignored"))
            Glibc.close(fd)
            return nil
        }
        let log = ConversationLog(id: id, path: path, fd: fd, size: off_t(goodSize), loop: loop, syncEnabled: syncEnabled)
        if !conversation.interruptedReplies.isEmpty {
            do {
                try log.write(conversation.interruptedReplies.map(LogRecord.replyFinished))
                if let error = log.syncNow() { throw error }
            } catch {
                problems.append(LoadProblem(file: path, line: nil, message: "cannot record interrupted replies: \(error)"))
            }
            conversation.interruptedReplies = []
        }
        return Loaded(conversation: conversation, log: log)
    }
}
