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
    /// The blobs its messages' attachments name (the summary's, without copying the rest of it).
    public var blobs: Set<String> { summary.blobs }
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
            Files.close(fd)
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
        guard let status = try? isOpen ? Files.status(of: fd) : Files.status(path: path) else { return nil }
        let seen = FileIdentity(status)
        // The index must describe whole records only: a file longer than what we know holds
        // whole records (a write we are cutting back) is not recorded.
        guard seen.size == Int64(size) else { return nil }
        identity = seen
        return seen
    }

    /// Bytes of the log from `offset` (`pread`), for messages known by where they are.
    func read(offset: Int, count: Int) throws(StoreError) -> [UInt8] {
        do {
            return try Files.read(fd, offset: offset, count: count)
        } catch {
            throw StoreError(errno: error.code, operation: "read \(path)")
        }
    }

    /// Writes records now. A failed or short write leaves the file as it was.
    public func write(_ records: [LogRecord], at time: Timestamp = .now()) throws(StoreError) {
        guard fd >= 0 else { throw StoreError(errno: EBADF, operation: "append to \(path)") }
        var bytes: [UInt8] = []
        #if DEBUG
        let stored = DebugFault.stored(records)  // CONFAB_DEBUG_FAULT: the file may not get what was asked
        #else
        let stored = records
        #endif
        for record in stored {
            record.json(at: time).write(into: &bytes)
            bytes.append(0x0A)
        }
        let (written, failure) = Files.writeAll(fd, bytes)
        if let failure {
            // Never leave half a record behind: the next append would glue onto it.
            if written > 0 { try? Files.truncate(fd, to: Int64(size)) }
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
            Self.syncData(fd, path: path)
        }, done: { [self] error in
            syncInFlight = false
            if error != nil {
                // Every record since the last good sync was refused to whoever waits for it, and
                // the ones written during this sync would follow a refused one. Cut them all off:
                // otherwise the next sync that succeeds (or a restart) would bring a refused
                // message back. Linux may also have dropped the failed pages' error by then.
                if size > syncedSize, (try? Files.truncate(fd, to: Int64(syncedSize))) != nil {
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
        return Self.syncData(fd, path: path)
    }

    private static func syncData(_ fd: Int32, path: String) -> StoreError? {
        do {
            try Files.syncData(fd)
            return nil
        } catch {
            return StoreError(errno: error.code, operation: "fdatasync \(path)")
        }
    }

    /// Closes the file once no sync is using the descriptor.
    public func close() {
        if syncInFlight { closeWhenIdle = true } else { closeNow() }
    }

    private func closeNow() {
        if fd >= 0 { Files.close(fd) }
        fd = -1
        closeWhenIdle = false
        summary.forgetFold()
    }
}

extension FileIdentity {
    init(_ status: FileStatus) {
        self.init(size: status.size, inode: status.inode, modifiedNanoseconds: status.modifiedNanoseconds)
    }
}
