import CLibUV

// Threading model, stated once for the whole daemon: every object in this module (and
// every object of the daemon that holds one) lives on the thread that calls `Loop.run()`.
// libuv invokes all callbacks on that thread. The only code that runs elsewhere is the
// closure passed to `Loop.queueWork`, which must be `@Sendable` and touch nothing else.
// That is why these classes are neither `Sendable` nor guarded by locks.

/// A libuv error code with its libuv name and message.
public struct UVError: Error, CustomStringConvertible, Equatable, Sendable {
    public let code: Int32
    public init(_ code: Int32) { self.code = code }
    public var name: String { String(cString: uv_err_name(code)) }
    public var message: String { String(cString: uv_strerror(code)) }
    public var description: String { "\(message) (\(name))" }
    /// Turns a negative libuv return value into a thrown error.
    @discardableResult
    static func check(_ rc: Int32) throws(UVError) -> Int32 {
        if rc < 0 { throw UVError(rc) }
        return rc
    }
}

/// One libuv loop. Owns a scratch buffer that every stream reads into: libuv calls
/// alloc and read back to back on this thread, so one buffer serves all connections. And
/// likewise the array of pieces a vectored write hands to libuv, which libuv copies when it
/// keeps it: a write of a few thousand frames would otherwise allocate (and, freed, give
/// back to the system) a fresh array of that size every time, page faults included.
public final class Loop {
    let raw: UnsafeMutablePointer<uv_loop_t>
    let readBuffer: UnsafeMutableRawBufferPointer
    private var writeVectors = UnsafeMutablePointer<uv_buf_t>.allocate(capacity: 64)
    private var writeVectorCapacity = 64
    private var isClosed = false

    /// Room for `count` write pieces, valid until the next call.
    func writeVectors(count: Int) -> UnsafeMutablePointer<uv_buf_t> {
        if count > writeVectorCapacity {
            writeVectors.deallocate()
            writeVectorCapacity = max(count, writeVectorCapacity * 2)
            writeVectors = .allocate(capacity: writeVectorCapacity)
        }
        return writeVectors
    }

    public init() throws(UVError) {
        raw = .allocate(capacity: 1)
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        let rc = uv_loop_init(raw)
        if rc < 0 {
            raw.deallocate()
            readBuffer.deallocate()
            throw UVError(rc)
        }
        raw.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        if !isClosed { close() }
        raw.deallocate()
        readBuffer.deallocate()
        writeVectors.deallocate()
    }

    /// Runs until `stop()` or until nothing is left to do.
    public func run() { uv_run(raw, UV_RUN_DEFAULT) }

    /// Runs one round without blocking (used while draining at shutdown).
    @discardableResult
    public func runOnce(wait: Bool) -> Bool { uv_run(raw, wait ? UV_RUN_ONCE : UV_RUN_NOWAIT) != 0 }

    public func stop() { uv_stop(raw) }

    private var nextTurnQueue: NextTurnQueue?
    /// Background threads still working (`runOnBackgroundThread`).
    var backgroundJobs: [AnyBackgroundJob] = []

    /// Runs `work` on the next loop turn, outside whatever callback is running now.
    public func onNextTurn(_ work: @escaping () -> Void) {
        let queue = nextTurnQueue ?? NextTurnQueue(loop: self)
        nextTurnQueue = queue
        queue.add(work)
    }

    /// The loop's cached clock, in milliseconds.
    public var now: UInt64 { uv_now(raw) }

    /// Closes every handle still open, lets their close callbacks run, then closes the loop.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        joinBackgroundThreads()
        nextTurnQueue = nil
        uv_walk(raw, { handle, _ in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            if let data = handle.pointee.data {
                Unmanaged<Handle>.fromOpaque(data).takeUnretainedValue().close()
            } else {
                uv_close(handle, nil)
            }
        }, nil)
        while uv_run(raw, UV_RUN_NOWAIT) != 0 {}
        uv_loop_close(raw)
    }

    /// Runs `work` on libuv's thread pool and `done` with its result back on the loop thread.
    /// For blocking calls (fsync, reading a large file) that must not stall the loop.
    public func queueWork<T: Sendable>(_ work: @escaping @Sendable () -> T, done: @escaping (T) -> Void) {
        let job = WorkJob(work: work, done: done)
        let req = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        req.pointee.data = Unmanaged.passRetained(job).toOpaque()
        let rc = uv_queue_work(raw, req, { req in
            // Thread pool: only the Sendable closure is touched here.
            Unmanaged<AnyWorkJob>.fromOpaque(req!.pointee.data).takeUnretainedValue().runOnPool()
        }, { req, _ in
            let job = Unmanaged<AnyWorkJob>.fromOpaque(req!.pointee.data).takeRetainedValue()
            req!.deallocate()
            job.finishOnLoop()
        })
        if rc < 0 {
            // Only fails for invalid arguments; run inline rather than lose the result.
            Unmanaged<AnyWorkJob>.fromOpaque(req.pointee.data).release()
            req.deallocate()
            done(work())
        }
    }
}

class AnyWorkJob {
    func runOnPool() {}
    func finishOnLoop() {}
}

private final class WorkJob<T: Sendable>: AnyWorkJob {
    let work: @Sendable () -> T
    let done: (T) -> Void
    // Written on the pool thread, read on the loop thread after libuv's after_work
    // callback, which libuv orders after the write.
    var result: T?
    init(work: @escaping @Sendable () -> T, done: @escaping (T) -> Void) {
        self.work = work
        self.done = done
    }
    override func runOnPool() { result = work() }
    override func finishOnLoop() { done(result!) }
}

extension Loop {
    static func from(_ raw: UnsafeMutablePointer<uv_loop_t>) -> Loop {
        Unmanaged<Loop>.fromOpaque(raw.pointee.data!).takeUnretainedValue()
    }
}
