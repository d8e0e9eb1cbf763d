import CLibUV

/// Bytes written to one or many streams. Encoded once, shared by every write that sends
/// it, and freed only when the last write's callback has run (neovim's wstream shape).
/// Built from contiguous bytes with one memcpy: a generic collection initialiser would run
/// unspecialised across the module boundary, element by element.
public final class OutboundBuffer {
    let bytes: UnsafeMutableRawBufferPointer
    public let count: Int

    public init(_ source: UnsafeRawBufferPointer) {
        count = source.count
        bytes = .allocate(byteCount: max(count, 1), alignment: 1)
        if let base = source.baseAddress, count > 0 {
            bytes.baseAddress!.copyMemory(from: base, byteCount: count)
        }
    }

    public init(_ source: [UInt8]) {
        count = source.count
        bytes = .allocate(byteCount: max(count, 1), alignment: 1)
        if count > 0 {
            source.withUnsafeBytes { bytes.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
        }
    }

    deinit { bytes.deallocate() }
}

public struct PeerCredentials: Sendable, Equatable {
    public let uid: UInt32
    public let gid: UInt32
    public let pid: Int32
}

public enum ReadEvent {
    case data(UnsafeRawBufferPointer)
    case endOfFile
    case failed(UVError)
}

/// Keeps the buffers of a queued write alive until libuv is done with them.
private final class WriteRequest {
    let buffers: [OutboundBuffer]
    let onFailure: ((UVError) -> Void)?
    let onWritten: (() -> Void)?
    init(buffers: [OutboundBuffer], onFailure: ((UVError) -> Void)?, onWritten: (() -> Void)?) {
        self.buffers = buffers
        self.onFailure = onFailure
        self.onWritten = onWritten
    }
}

/// A connected Unix-domain stream socket.
public final class UnixStream: Handle {
    private var onRead: ((ReadEvent) -> Void)?

    init(loop: Loop) throws(UVError) {
        super.init(loop: loop, type: UV_NAMED_PIPE)
        let rc = uv_pipe_init(loop.raw, pipe, 0)
        if rc < 0 {
            abandon()
            throw UVError(rc)
        }
    }

    var pipe: UnsafeMutablePointer<uv_pipe_t> { UnsafeMutablePointer(OpaquePointer(handle)) }
    var stream: UnsafeMutablePointer<uv_stream_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    /// Who is on the other end, as the kernel says (SO_PEERCRED), never as the peer claims.
    public var peerCredentials: PeerCredentials? {
        guard let fd = fileDescriptor else { return nil }
        var uid: uid_t = 0, gid: gid_t = 0, pid: pid_t = 0
        guard confab_peer_credentials(fd, &uid, &gid, &pid) == 0 else { return nil }
        return PeerCredentials(uid: uid, gid: gid, pid: pid)
    }

    /// Bytes queued in libuv and not yet taken by the kernel.
    public var writeQueueSize: Int { Int(uv_stream_get_write_queue_size(stream)) }

    public func startReading(_ onRead: @escaping (ReadEvent) -> Void) {
        self.onRead = onRead
        uv_read_start(stream, { handle, _, buf in
            let loop = Loop.from(handle!.pointee.loop)
            buf!.pointee.base = loop.readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self)
            buf!.pointee.len = loop.readBuffer.count
        }, { stream, nread, buf in
            let this = Handle.object(stream!.pointee.data, as: UnixStream.self)
            if nread > 0 {
                this.onRead?(.data(UnsafeRawBufferPointer(start: buf!.pointee.base, count: nread)))
            } else if nread == Int(UV_EOF.rawValue) {
                this.onRead?(.endOfFile)
            } else if nread < 0 {
                this.onRead?(.failed(UVError(Int32(nread))))
            }
        })
    }

    public func stopReading() { uv_read_stop(stream) }

    private final class ShutdownRequest {
        let then: () -> Void
        init(_ then: @escaping () -> Void) { self.then = then }
    }

    /// Lets queued writes finish, then shuts the write side; `then` runs either way.
    public func shutdown(then: @escaping () -> Void) {
        let req = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        req.pointee.data = Unmanaged.passRetained(ShutdownRequest(then)).toOpaque()
        let rc = uv_shutdown(req, stream) { req, _ in
            let request = Unmanaged<ShutdownRequest>.fromOpaque(req!.pointee.data).takeRetainedValue()
            req!.deallocate()
            request.then()
        }
        if rc < 0 {
            Unmanaged<ShutdownRequest>.fromOpaque(req.pointee.data).release()
            req.deallocate()
            then()
        }
    }

    /// Queues `buffer`; `completion` runs once the kernel has it or the write failed.
    /// Returns the error when the write could not even be queued (stream closing).
    @discardableResult
    public func write(_ buffer: OutboundBuffer, onFailure: ((UVError) -> Void)? = nil) -> UVError? {
        write([buffer], onFailure: onFailure)
    }

    /// Writes several buffers as one vectored write: what the socket takes at once goes now, in
    /// this call (one writev(2), as Redis writes); the rest, if any, is queued in libuv and
    /// written as the socket drains. A failure now is returned; `onFailure` runs (on a later
    /// turn) only if the queued rest cannot be written; `onWritten` only once a queued rest is
    /// written (a write taken whole at once calls neither).
    ///
    /// Written at once because a libuv write request, even one the socket takes whole, costs
    /// an allocation, a callback on the next turn and an epoll_ctl(2) to stop watching for
    /// writability: at 100 readers that was a second system call for every client every turn.
    @discardableResult
    public func write(_ buffers: [OutboundBuffer], onFailure: ((UVError) -> Void)? = nil, onWritten: (() -> Void)? = nil) -> UVError? {
        if isClosing { return UVError(Int32(UV_ECANCELED.rawValue)) }
        guard !buffers.isEmpty else { return nil }
        let bufs = loop.writeVectors(count: buffers.count)
        var total = 0
        buffers.withUnsafeBufferPointer { buffers in
            for index in buffers.indices {
                let buffer = buffers[index]
                bufs[index] = uv_buf_init(buffer.bytes.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(buffer.count))
                total += buffer.count
            }
        }
        // libuv refuses (EAGAIN) while earlier bytes are still queued, which keeps the order.
        let taken = uv_try_write(stream, bufs, UInt32(buffers.count))
        if taken < 0 && taken != UV_EAGAIN.rawValue { return UVError(taken) }
        var written = max(0, Int(taken))
        if written == total { return nil }
        // The rest: from the first buffer not taken whole, starting inside it.
        var first = 0
        while written >= buffers[first].count {
            written -= buffers[first].count
            first += 1
        }
        bufs[first].base += written
        bufs[first].len -= numericCast(written)
        let request = WriteRequest(buffers: buffers, onFailure: onFailure, onWritten: onWritten)
        let req = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        req.pointee.data = Unmanaged.passRetained(request).toOpaque()
        // libuv copies the uv_buf_t array itself when it has to keep it past this call.
        let rc = uv_write(req, stream, bufs + first, UInt32(buffers.count - first)) { req, status in
            let request = Unmanaged<WriteRequest>.fromOpaque(req!.pointee.data).takeRetainedValue()
            req!.deallocate()
            if status < 0 { request.onFailure?(UVError(status)) } else { request.onWritten?() }
        }
        if rc < 0 {
            Unmanaged<WriteRequest>.fromOpaque(req.pointee.data).release()
            req.deallocate()
            return UVError(rc)
        }
        return nil
    }

    override func didClose() { onRead = nil }
}

/// A listening Unix-domain socket: bound to a path by us, or handed over by systemd.
public final class UnixListener: Handle {
    private var onConnection: ((UVError?) -> Void)?

    public init(loop: Loop) throws(UVError) {
        super.init(loop: loop, type: UV_NAMED_PIPE)
        let rc = uv_pipe_init(loop.raw, pipe, 0)
        if rc < 0 {
            abandon()
            throw UVError(rc)
        }
    }

    private var pipe: UnsafeMutablePointer<uv_pipe_t> { UnsafeMutablePointer(OpaquePointer(handle)) }
    private var stream: UnsafeMutablePointer<uv_stream_t> { UnsafeMutablePointer(OpaquePointer(handle)) }

    public func bind(path: String) throws(UVError) {
        try UVError.check(uv_pipe_bind(pipe, path))
    }

    /// Adopts an already-listening socket (socket activation).
    public func open(fileDescriptor: Int32) throws(UVError) {
        try UVError.check(uv_pipe_open(pipe, fileDescriptor))
    }

    public func listen(backlog: Int32 = 128, _ onConnection: @escaping (UVError?) -> Void) throws(UVError) {
        self.onConnection = onConnection
        try UVError.check(uv_listen(stream, backlog) { server, status in
            let this = Handle.object(server!.pointee.data, as: UnixListener.self)
            this.onConnection?(status < 0 ? UVError(status) : nil)
        })
    }

    public func accept() throws(UVError) -> UnixStream {
        let client = try UnixStream(loop: loop)
        let rc = uv_accept(stream, client.stream)
        if rc < 0 {
            client.close()
            throw UVError(rc)
        }
        return client
    }

    override func didClose() { onConnection = nil }
}
