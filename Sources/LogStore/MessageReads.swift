import ConfabProtocol
import EventLoop
import Posix
#if canImport(Glibc)
import Glibc
#endif

extension ConversationLog {
    /// The messages `stored` names, read from the log on the thread pool: a reply's request in a
    /// long conversation reads every earlier record it sends, which would stall every other
    /// client for as long. `done` runs on the loop, always on a later turn, with them in the
    /// order given or why they could not be read. The read opens the file by its path, so the
    /// log may be closed meanwhile (its conversation deleted, or the daemon stopping); the
    /// records it names never move while it exists (the log is only appended to).
    public func readMessages(_ stored: [StoredMessage], on loop: Loop, done: @escaping (Result<[Message], StoreError>) -> Void) {
        let path = self.path
        loop.queueWork({ () -> Result<[Message], StoreError> in
            #if DEBUG
            Self.holdRead()
            #endif
            do throws(StoreError) {
                return .success(try Self.readMessages(stored, path: path))
            } catch {
                return .failure(error)
            }
        }, done: done)
    }

    /// As the log's own `readMessages`, from a descriptor of its own, for the thread pool.
    static func readMessages(_ stored: [StoredMessage], path: String) throws(StoreError) -> [Message] {
        guard !stored.isEmpty else { return [] }
        let fd: Int32
        do {
            fd = try Files.open(path, O_RDONLY)
        } catch {
            throw StoreError(errno: error.code, operation: "open \(path)")
        }
        defer { Files.close(fd) }
        return try messages(stored, path: path) { offset, count throws(StoreError) in
            do throws(Errno) {
                return try Files.read(fd, offset: offset, count: count)
            } catch {
                throw StoreError(errno: error.code, operation: "read \(path)")
            }
        }
    }

    #if DEBUG
    /// Test only, and only in debug builds: with `CONFAB_TEST_ONLY_HOLD_MESSAGE_READS` naming a
    /// FIFO, every read of messages on the thread pool waits there first: it opens the FIFO
    /// (which returns once the test opens it for writing, so the test knows a read is under way)
    /// and reads it to its end (the test closing it lets the read go on). In-process tests set
    /// `holdingReads` instead. Release builds have neither.
    nonisolated(unsafe) static var holdingReads: (@Sendable () -> Void)? = {
        guard let fifo = getenv("CONFAB_TEST_ONLY_HOLD_MESSAGE_READS").map({ String(cString: $0) }) else { return nil }
        return {
            guard let fd = try? Files.open(fifo, O_RDONLY) else { return }
            _ = try? Files.readAll(fd)
            Files.close(fd)
        }
    }()

    private static func holdRead() { holdingReads?() }
    #endif
}
