#if canImport(Glibc)
import Glibc
#endif

/// Work started on a thread of its own, whose result the starting thread waits for with
/// `result()`. Start-up uses it to read the index while the loop thread lists and `stat`s the
/// logs: on two cores the two overlap. Without a thread (resource limits) the work runs in
/// `result()` instead.
public final class SideThread<T: Sendable>: SideThreadBody, @unchecked Sendable {
    private let work: @Sendable () -> T
    private var value: T?
    private var thread: pthread_t?

    public init(_ work: @escaping @Sendable () -> T) {
        self.work = work
        super.init()
        thread = Self.start(self)
    }

    override public func run() { value = work() }

    /// Waits for the thread (pthread_join orders its writes before this read).
    public func result() -> T {
        if let thread {
            self.thread = nil
            pthread_join(thread, nil)
        }
        if let value { return value }
        let computed = work()
        value = computed
        return computed
    }
}

/// The part the C thread function sees: not generic, so a plain C callback can call it.
public class SideThreadBody: @unchecked Sendable {
    public func run() {}

    static func start(_ body: SideThreadBody) -> pthread_t? {
        var id = pthread_t()
        let argument = Unmanaged.passRetained(body).toOpaque()
        let rc = pthread_create(&id, nil, { argument in
            Unmanaged<SideThreadBody>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, argument)
        guard rc == 0 else {
            Unmanaged<SideThreadBody>.fromOpaque(argument).release()
            return nil
        }
        return id
    }
}
