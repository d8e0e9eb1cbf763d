import ConfabProtocol
import EventLoop

/// One connected client: its socket, who it is, what it is attached to, and its outbox.
///
/// The outbox keeps everything a client is sent in one order: a response waiting on the
/// disk holds back what comes after it, so a client never sees, say, the deltas that
/// follow an `attach` before the `attach` result that they continue.
///
/// Sending never writes and never closes: frames are queued, and the `OutputFlusher` writes
/// each client's queue with one vectored write once per loop turn. A client that must go
/// (too slow, a failed write) is only marked here and closed by the flusher, so no broadcast
/// loop ever sees a client vanish, or a notification overtake another, halfway through.
final class ClientSession {
    let id: String
    let stream: UnixStream
    let credentials: PeerCredentials
    /// The login the kernel's uid names, or `link:ID` once the connection declared a share link.
    private(set) var login: String
    var name: String
    /// The share link this connection relays, declared in its first `hello`: from then on it
    /// is that link's holder, not its uid's (`Broker.permission(of:on:)`).
    private(set) var link: LinkGrant?
    /// Declared the gateway's at `hello` (a link's connection is too): counted in a class of
    /// its own that can never take the owner's last slots (`Broker.gatewayLimit`).
    private(set) var isGatewayClass = false
    /// Made a call other than `hello`: too late to declare a link (it would not undo what the
    /// uid's rights already did: attachments, uploads, searches).
    var hasCalled = false
    var clientName = ""
    var framer: LineFramer
    var attached: Set<String> = []
    /// `blob.put` uploads in progress, by upload id (`Blobs.swift`).
    var uploads: [String: BlobUpload] = [:]
    var nextUploadNumber = 1
    /// Uploads whose final chunk came, being written, and their bytes.
    var uploadsBeingStored = 0
    var uploadBytesBeingStored = 0
    /// The blobs this connection stored, by digest: the only ones its messages may name.
    var storedBlobs: [String: StoredBlob] = [:]
    /// Bytes of `storedBlobs` no message of this connection has named yet: files on disk only
    /// this connection holds, bounded (`BrokerLimits.maxUnsentBlobBytes`, from `limits.attachment_room_mib`).
    var unsentBlobBytes = 0
    /// Bytes of uploads this connection holds in memory: in progress and being written.
    var uploadBytesInMemory: Int { uploads.values.reduce(uploadBytesBeingStored) { $0 + $1.bytes.count } }
    private(set) var isClosed = false
    private let maxBufferBytes: Int
    private unowned let flusher: OutputFlusher
    private var held: [Slot] = []
    private var heldBytes = 0
    /// Frames released in order and not yet handed to the socket.
    private var pending: [OutboundBuffer] = []
    /// Why the flusher must close this client, once it is marked to go.
    private var closeReason: String??
    /// Hang up once what is pending is written (after a fatal error, at shutdown).
    private var hangUpReason: String??
    private var isShuttingDown = false
    /// Frames of room an emptied outbox keeps for the next turn.
    private static let keptOutboxCapacity = 1024
    /// On the flusher's list for this turn (Redis's CLIENT_PENDING_WRITE flag).
    var isQueuedForFlush = false
    /// Called once when the session ends, with the reason (nil for a normal hang-up).
    var onClose: ((ClientSession, String?) -> Void)?
    /// Requests whose answer is not known yet (their place is reserved in the outbox).
    private(set) var unanswered = 0
    /// Reading stopped: too many requests unanswered, or too much output unwritten. Lines
    /// already read wait in `deferred`.
    var isReadingPaused = false
    private var resumeAt = 0
    private var resumeAtBytes = 0
    /// Bytes of frames queued this turn, not yet handed to the socket.
    private var pendingBytes = 0
    private var deferred: [[UInt8]] = []
    private var deferredStart = 0
    private var wantsToRead = false
    /// Called from the flusher once a paused client has room again (see `pauseReading`).
    var onRoomToRead: ((ClientSession) -> Void)?

    final class Slot {
        var buffer: OutboundBuffer?
        var isFilled: Bool
        init(_ buffer: OutboundBuffer? = nil) {
            self.buffer = buffer
            isFilled = buffer != nil
        }
    }

    init(id: String, stream: UnixStream, credentials: PeerCredentials, login: String, maxLineBytes: Int, maxBufferBytes: Int,
         flusher: OutputFlusher) {
        self.id = id
        self.stream = stream
        self.credentials = credentials
        self.login = login
        self.name = login
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
        self.maxBufferBytes = maxBufferBytes
        self.flusher = flusher
    }

    var info: ClientInfo { ClientInfo(id: id, uid: credentials.uid, login: login, name: name, client: clientName, link: link?.id) }

    func author() -> Author { Author(uid: credentials.uid, login: login, name: name, clientID: id, link: link?.id) }

    /// From now on the connection is the link's holder: its login names the link.
    func declare(link grant: LinkGrant) {
        link = grant
        // A name never chosen was the uid's login: the link's stands in for it.
        if name == login { name = "link:" + grant.id }
        login = "link:" + grant.id
        isGatewayClass = true
    }

    func declareGateway() { isGatewayClass = true }

    /// Hanging up or closed: lines still read from it are not handled (a connection refused at
    /// `hello` must not go on as what it was before).
    var isEnding: Bool { !isTakingFrames }

    /// Still taking frames: not closed, not marked to close, not hanging up.
    private var isTakingFrames: Bool { !isClosed && closeReason == nil && hangUpReason == nil }

    /// Queues a frame now, or after the responses still being waited for.
    func send(_ buffer: OutboundBuffer) {
        guard isTakingFrames else { return }
        if held.isEmpty {
            queue(buffer)
        } else {
            held.append(Slot(buffer))
            heldBytes += buffer.count
            checkBudget()
        }
    }

    func send(_ bytes: [UInt8]) { send(OutboundBuffer(bytes)) }

    /// A place in the outbox for a response that will be known later.
    func reserve() -> Slot {
        let slot = Slot()
        held.append(slot)
        unanswered += 1
        return slot
    }

    /// Output owed and not yet taken by the socket: answers waiting for earlier ones, this
    /// turn's frames, and what libuv still queues.
    var unwrittenBytes: Int { heldBytes + pendingBytes + stream.writeQueueSize }

    /// Stops reading until no more than `resumeAt` requests are unanswered and no more than
    /// `resumeAtBytes` of output unwritten.
    func pauseReading(resumeAt: Int, resumeAtBytes: Int) {
        isReadingPaused = true
        self.resumeAt = resumeAt
        self.resumeAtBytes = resumeAtBytes
        stream.stopReading()
    }

    /// Made once: passed with every write, called only when a queued rest is written.
    private lazy var onWritten: () -> Void = { [unowned self] in resumeWhenThereIsRoom() }

    private var hasRoomToRead: Bool { unanswered <= resumeAt && unwrittenBytes <= resumeAtBytes }

    /// Resumes reading from the flusher once there is room again, never inside the callback
    /// that made the room.
    private func resumeWhenThereIsRoom() {
        guard isReadingPaused, !wantsToRead, isTakingFrames, hasRoomToRead else { return }
        wantsToRead = true
        flusher.schedule(self)
    }

    /// A line read while paused: it is handled when reading resumes.
    func deferLine(_ line: ArraySlice<UInt8>) { deferred.append(Array(line)) }

    func takeDeferredLine() -> [UInt8]? {
        guard deferredStart < deferred.count else {
            deferred = []
            deferredStart = 0
            return nil
        }
        defer { deferredStart += 1 }
        return deferred[deferredStart]
    }

    func fill(_ slot: Slot, _ bytes: [UInt8]) {
        // A client hanging up still gets the answers it was owed before the line that ended it.
        guard !isClosed, closeReason == nil else { return }
        if !slot.isFilled {
            unanswered -= 1
            resumeWhenThereIsRoom()
        }
        // A notification's slot is filled with nothing: it only kept its place.
        if !bytes.isEmpty {
            slot.buffer = OutboundBuffer(bytes)
            heldBytes += bytes.count
        }
        slot.isFilled = true
        while let first = held.first, first.isFilled {
            held.removeFirst()
            guard let buffer = first.buffer else { continue }
            heldBytes -= buffer.count
            queue(buffer)
        }
    }

    private func queue(_ buffer: OutboundBuffer) {
        pending.append(buffer)
        pendingBytes += buffer.count
        // Checked here, once per frame, without reaching the flusher (an unowned load) at all.
        if !isQueuedForFlush { flusher.schedule(self) }
    }

    private func checkBudget() {
        if heldBytes + stream.writeQueueSize > maxBufferBytes {
            markToClose("slow reader: more than \(maxBufferBytes) bytes waiting to be read")
        }
    }

    /// The client goes at the next flush, whatever is queued for it.
    private func markToClose(_ reason: String?) {
        guard !isClosed, closeReason == nil else { return }
        closeReason = .some(reason)
        stream.stopReading()
        flusher.schedule(self)
    }

    /// Called by the flusher once per turn: closes a client marked to go, or writes everything
    /// queued with one vectored write, judged first against the slow-reader limit.
    func flush() {
        guard !isClosed else { return }
        if let reason = closeReason {
            close(reason: reason)
            return
        }
        if !pending.isEmpty {
            if isShuttingDown {
                pending = []
                pendingBytes = 0
            } else {
                // Judge by what is already waiting in the socket's queue, not by this turn's frames:
                // one frame larger than the limit (a long reply's final message) must still reach a
                // client that keeps up.
                if stream.writeQueueSize > maxBufferBytes {
                    close(reason: "slow reader: more than \(maxBufferBytes) bytes waiting to be read")
                    return
                }
                var frames = pending
                pending = []
                pendingBytes = 0
                // Held strongly until a queued rest is written (at the latest when the socket
                // closes): a weak reference would give every session a side table, and make
                // every retain of it, once per frame, slower.
                if let error = stream.write(frames, onFailure: { error in self.markToClose("write failed: \(error)") },
                                            onWritten: onWritten) {
                    close(reason: "write failed: \(error)")
                    return
                }
                // The array goes back for the next turn's frames, with its room: a new one for
                // every client every turn (and its growth, a doubling at a time, in a burst)
                // showed up in profiles. When the socket did not take everything, libuv's
                // request still holds it and this makes a fresh one of the same size. Room for
                // more than a few turns' worth is not kept: a burst must not leave every
                // client holding its peak.
                if frames.capacity <= Self.keptOutboxCapacity {
                    frames.removeAll(keepingCapacity: true)
                    pending = frames
                }
            }
        }
        if wantsToRead {
            wantsToRead = false
            if isTakingFrames { onRoomToRead?(self) }
        } else if isReadingPaused {
            // What this turn wrote may have made the room (a write taken whole calls nothing back).
            resumeWhenThereIsRoom()
        }
        if let reason = hangUpReason, !isShuttingDown, held.isEmpty {
            isShuttingDown = true
            // Held strongly: a refused client belongs to nobody else, and its socket must still close.
            stream.shutdown { self.close(reason: reason) }
        }
    }

    /// Stops reading, sends what it owes (responses still waiting on the disk included, once
    /// they are known), then hangs up: after a fatal protocol error, at shutdown (whose own
    /// deadline closes a client that is still owed something then).
    func finish(reason: String?) {
        guard isTakingFrames else { return }
        stream.stopReading()
        hangUpReason = .some(reason)
        flusher.schedule(self)
    }

    func close(reason: String?) {
        guard !isClosed else { return }
        isClosed = true
        held = []
        heldBytes = 0
        pending = []
        pendingBytes = 0
        deferred = []
        onRoomToRead = nil
        stream.close()
        let onClose = self.onClose
        self.onClose = nil
        onClose?(self, reason)
    }
}

/// Every client's output, written once per loop turn just before the loop waits for I/O
/// (Redis's `beforeSleep` / `handleClientsWithPendingWrites`): one vectored write per client
/// per turn instead of one write per frame, and clients closed here, outside any broadcast.
final class OutputFlusher {
    private let beforePoll: BeforePoll
    private var queued: [ClientSession] = []

    init(loop: Loop) {
        beforePoll = BeforePoll(loop: loop)
        beforePoll.start { [unowned self] in flush() }
    }

    func schedule(_ client: ClientSession) {
        guard !client.isQueuedForFlush else { return }
        client.isQueuedForFlush = true
        queued.append(client)
    }

    /// Runs once per loop turn, before the loop sleeps (the `BeforePoll` hook above).
    func flush() {
        // Closing a client tells the others it left: those frames go out in this same pass.
        while !queued.isEmpty {
            let batch = queued
            queued = []
            for client in batch {
                client.isQueuedForFlush = false
                client.flush()
            }
        }
    }

    func close() { beforePoll.close() }
}
