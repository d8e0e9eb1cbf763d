import CLibUV
#if canImport(Glibc)
import Glibc
#endif

extension Loop {
    /// Runs `work` on a thread of its own at a lower CPU priority (`nice`, Linux's per-thread
    /// nice value) and `done` with its result back on the loop thread.
    ///
    /// For long CPU-bound work (a search through every log) that must neither hold libuv's
    /// thread pool, whose few threads the fdatasyncs of every send wait on, nor take a core
    /// from the loop thread when they compete: the kernel gives a nice-10 thread about a tenth
    /// of the CPU of a nice-0 one, so the loop's streams keep their latency and the work uses
    /// what is idle. A thread costs tens of microseconds to start: not for small jobs.
    public func runOnBackgroundThread<T: Sendable>(nice: Int32 = 10, _ work: @escaping @Sendable () -> T,
                                                   done: @escaping (T) -> Void) {
        let job = BackgroundJob(loop: self, work: work, done: done)
        guard job.start(nice: nice) else {
            // No thread to be had (resource limits): do it here rather than lose it.
            job.close()
            done(work())
            return
        }
        backgroundJobs.append(job)
    }

    /// Waits for every background thread still working. Their async handles must outlive
    /// them (each ends by signalling its handle), so `close()` calls this before it closes
    /// any handle; their results are not delivered.
    func joinBackgroundThreads() {
        for job in backgroundJobs { job.join() }
        backgroundJobs = []
    }
}

/// The loop's side of one background job: an async handle the thread signals when the result
/// is ready. Non-generic, so libuv's C callback can find it.
class AnyBackgroundJob: Handle {
    fileprivate var thread: pthread_t?

    func deliver() {}

    /// Waits for the thread to end (at once when it has signalled: that is its last act).
    func join() {
        guard let thread else { return }
        self.thread = nil
        pthread_join(thread, nil)
    }
}

private final class BackgroundJob<T: Sendable>: AnyBackgroundJob {
    private var done: ((T) -> Void)?
    private let side: ThreadSide<T>

    init(loop: Loop, work: @escaping @Sendable () -> T, done: @escaping (T) -> Void) {
        self.done = done
        side = ThreadSide(work: work)
        super.init(loop: loop, type: UV_ASYNC)
        let raw = UnsafeMutablePointer<uv_async_t>(OpaquePointer(handle))
        uv_async_init(loop.raw, raw) { async in
            Handle.object(async!.pointee.data, as: AnyBackgroundJob.self).deliver()
        }
        side.async = raw
    }

    func start(nice: Int32) -> Bool {
        side.nice = nice
        var id = pthread_t()
        let argument = Unmanaged.passRetained(side as AnyThreadSide).toOpaque()
        let rc = pthread_create(&id, nil, { argument in
            let side = Unmanaged<AnyThreadSide>.fromOpaque(argument!).takeRetainedValue()
            side.run()
            return nil
        }, argument)
        if rc != 0 {
            Unmanaged<AnyThreadSide>.fromOpaque(argument).release()
            return false
        }
        thread = id
        return true
    }

    override func deliver() {
        // uv_async_send orders the thread's write of the result before this callback.
        guard let done, let result = side.result else { return }
        self.done = nil
        join()
        loop.backgroundJobs.removeAll { $0 === self }
        close()
        done(result)
    }

    override func didClose() { done = nil }
}

class AnyThreadSide: @unchecked Sendable {
    func run() {}
}

/// What the background thread touches, and nothing else: the work, its result, the async
/// handle to signal (uv_async_send is the one libuv call safe from any thread). The handle
/// stays open until the loop has had the signal.
private final class ThreadSide<T: Sendable>: AnyThreadSide, @unchecked Sendable {
    let work: @Sendable () -> T
    var result: T?
    var nice: Int32 = 0
    var async: UnsafeMutablePointer<uv_async_t>?

    init(work: @escaping @Sendable () -> T) { self.work = work }

    override func run() {
        // On Linux the nice value belongs to the thread: this one alone is lowered.
        if nice != 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) }
        result = work()
        uv_async_send(async)
    }
}
