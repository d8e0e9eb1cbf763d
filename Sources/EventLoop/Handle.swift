import CLibUV

/// Base of every libuv handle wrapper. A handle keeps itself alive (one retain held in
/// `handle->data`) from creation until libuv's close callback, so libuv never calls into
/// freed memory; its storage is freed only in that callback, as libuv requires.
public class Handle {
    let handle: UnsafeMutablePointer<uv_handle_t>
    private let storage: UnsafeMutableRawPointer
    public let loop: Loop
    private var closeCallbacks: [() -> Void] = []
    public private(set) var isClosing = false

    init(loop: Loop, type: uv_handle_type) {
        self.loop = loop
        storage = .allocate(byteCount: uv_handle_size(type), alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: uv_handle_size(type))
        handle = storage.assumingMemoryBound(to: uv_handle_t.self)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// The descriptor under the handle, for the few things libuv does not do (SO_PEERCRED,
    /// counting descriptors); nil for a handle that has none or is closing.
    public var fileDescriptor: Int32? {
        var fd: uv_os_fd_t = -1
        return uv_fileno(handle, &fd) == 0 ? fd : nil
    }

    /// Call when the matching uv_*_init failed: the handle was never registered with the loop.
    func abandon() {
        isClosing = true
        Unmanaged<Handle>.fromOpaque(handle.pointee.data!).release()
    }

    deinit { storage.deallocate() }

    /// Closes the handle; `then` runs once libuv has let go of it.
    public func close(then: (() -> Void)? = nil) {
        if let then { closeCallbacks.append(then) }
        guard !isClosing else { return }
        isClosing = true
        uv_close(handle) { handle in
            let this = Unmanaged<Handle>.fromOpaque(handle!.pointee.data!).takeRetainedValue()
            this.didClose()
            let callbacks = this.closeCallbacks
            this.closeCallbacks = []
            for callback in callbacks { callback() }
        }
    }

    /// Subclasses drop their callbacks here, which breaks any reference cycle through them.
    func didClose() {}

    /// Keeps the loop from exiting while this handle is active (the default) or not.
    public func setKeepsLoopAlive(_ keep: Bool) {
        if keep { uv_ref(handle) } else { uv_unref(handle) }
    }

    static func object<T: Handle>(_ raw: UnsafeMutableRawPointer?, as: T.Type) -> T {
        Unmanaged<Handle>.fromOpaque(raw!).takeUnretainedValue() as! T
    }
}

public final class Timer: Handle {
    private var callback: (() -> Void)?

    public init(loop: Loop) {
        super.init(loop: loop, type: UV_TIMER)
        uv_timer_init(loop.raw, raw)
    }

    private var raw: UnsafeMutablePointer<uv_timer_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    /// Fires after `milliseconds`, then every `repeat` milliseconds if non-zero.
    public func start(after milliseconds: UInt64, repeat: UInt64 = 0, _ callback: @escaping () -> Void) {
        self.callback = callback
        uv_timer_start(raw, { timer in
            let this = Handle.object(timer!.pointee.data, as: Timer.self)
            this.callback?()
        }, milliseconds, `repeat`)
    }

    /// Pushes a started one-shot timer back to fire `milliseconds` from now, with the same
    /// callback: cheap enough to call on every piece of data a deadline watches.
    public func postpone(to milliseconds: UInt64) {
        guard callback != nil, !isClosing else { return }
        uv_timer_start(raw, { timer in
            let this = Handle.object(timer!.pointee.data, as: Timer.self)
            this.callback?()
        }, milliseconds, 0)
    }

    public func stop() { uv_timer_stop(raw) }
    override func didClose() { callback = nil }
}

public final class SignalWatcher: Handle {
    private var callback: ((Int32) -> Void)?

    public init(loop: Loop) {
        super.init(loop: loop, type: UV_SIGNAL)
        uv_signal_init(loop.raw, raw)
    }

    private var raw: UnsafeMutablePointer<uv_signal_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    public func start(signal: Int32, _ callback: @escaping (Int32) -> Void) throws(UVError) {
        self.callback = callback
        try UVError.check(uv_signal_start(raw, { sig, signum in
            let this = Handle.object(sig!.pointee.data, as: SignalWatcher.self)
            this.callback?(signum)
        }, signal))
    }

    public func stop() { uv_signal_stop(raw) }
    override func didClose() { callback = nil }
}

public struct PollEvents: OptionSet, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let readable = PollEvents(rawValue: Int32(UV_READABLE.rawValue))
    public static let writable = PollEvents(rawValue: Int32(UV_WRITABLE.rawValue))
}

/// Readiness of a socket someone else reads and writes (libcurl's).
public final class Poll: Handle {
    private var callback: ((_ status: Int32, _ events: PollEvents) -> Void)?

    public init(loop: Loop, socket: Int32) throws(UVError) {
        super.init(loop: loop, type: UV_POLL)
        let rc = uv_poll_init_socket(loop.raw, raw, socket)
        if rc < 0 {
            abandon()
            throw UVError(rc)
        }
    }

    private var raw: UnsafeMutablePointer<uv_poll_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    public func start(_ events: PollEvents, _ callback: @escaping (_ status: Int32, _ events: PollEvents) -> Void) {
        self.callback = callback
        uv_poll_start(raw, events.rawValue, { poll, status, events in
            let this = Handle.object(poll!.pointee.data, as: Poll.self)
            this.callback?(status, PollEvents(rawValue: events))
        })
    }

    public func stop() { uv_poll_stop(raw) }
    override func didClose() { callback = nil }
}

/// Runs a callback once per loop turn, just before the loop waits for I/O (Redis's
/// `beforeSleep`): the place to flush what callbacks of this turn queued.
public final class BeforePoll: Handle {
    private var callback: (() -> Void)?

    public init(loop: Loop) {
        super.init(loop: loop, type: UV_PREPARE)
        uv_prepare_init(loop.raw, raw)
        // Waiting for work to flush is no reason to keep the loop running.
        uv_unref(handle)
    }

    private var raw: UnsafeMutablePointer<uv_prepare_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    public func start(_ callback: @escaping () -> Void) {
        self.callback = callback
        uv_prepare_start(raw) { prepare in
            Handle.object(prepare!.pointee.data, as: BeforePoll.self).callback?()
        }
    }

    public func stop() { uv_prepare_stop(raw) }
    override func didClose() { callback = nil }
}

/// Work handed to the next loop turn: what a C callback learned is acted on after the callback
/// has returned, and a completion that is known at once still reaches its caller later, as
/// every other completion does. Backed by an idle handle that runs only while work waits
/// (an active idle handle also keeps the loop from blocking in poll until it has run).
final class NextTurnQueue: Handle {
    private var pending: [() -> Void] = []

    init(loop: Loop) {
        super.init(loop: loop, type: UV_IDLE)
        uv_idle_init(loop.raw, raw)
    }

    private var raw: UnsafeMutablePointer<uv_idle_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    func add(_ work: @escaping () -> Void) {
        guard !isClosing else { return }
        if pending.isEmpty {
            uv_idle_start(raw) { idle in
                Handle.object(idle!.pointee.data, as: NextTurnQueue.self).runPending()
            }
        }
        pending.append(work)
    }

    private func runPending() {
        uv_idle_stop(raw)
        // Work added while this batch runs restarts the handle and waits for the next turn.
        let batch = pending
        pending = []
        for work in batch { work() }
    }

    override func didClose() { pending = [] }
}
