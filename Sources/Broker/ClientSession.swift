import ConfabProtocol
import EventLoop

/// One connected client: its socket, who it is, what it is attached to, and its outbox.
///
/// The outbox keeps everything a client is sent in one order: a response waiting on the
/// disk holds back what comes after it, so a client never sees, say, the deltas that
/// follow an `attach` before the `attach` result that they continue.
final class ClientSession {
    let id: String
    let stream: UnixStream
    let credentials: PeerCredentials
    let login: String
    var name: String
    var clientName = ""
    var framer: LineFramer
    var attached: Set<String> = []
    private(set) var isClosed = false
    private let maxBufferBytes: Int
    private var held: [Slot] = []
    private var heldBytes = 0
    /// Called once when the session ends, with the reason (nil for a normal hang-up).
    var onClose: ((ClientSession, String?) -> Void)?

    final class Slot {
        var buffer: OutboundBuffer?
        var isFilled: Bool
        init(_ buffer: OutboundBuffer? = nil) {
            self.buffer = buffer
            isFilled = buffer != nil
        }
    }

    init(id: String, stream: UnixStream, credentials: PeerCredentials, login: String, maxLineBytes: Int, maxBufferBytes: Int) {
        self.id = id
        self.stream = stream
        self.credentials = credentials
        self.login = login
        self.name = login
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
        self.maxBufferBytes = maxBufferBytes
    }

    var info: ClientInfo { ClientInfo(id: id, uid: credentials.uid, login: login, name: name, client: clientName) }

    func author() -> Author { Author(uid: credentials.uid, login: login, name: name, clientID: id) }

    /// Sends now, or after the responses still being waited for.
    func send(_ buffer: OutboundBuffer) {
        guard !isClosed else { return }
        if held.isEmpty {
            write(buffer)
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
        return slot
    }

    func fill(_ slot: Slot, _ bytes: [UInt8]) {
        guard !isClosed else { return }
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
            write(buffer)
        }
    }

    private func write(_ buffer: OutboundBuffer) {
        // Judge by what is already waiting: one frame larger than the limit (a long reply's
        // final message) must still reach a client that keeps up.
        if stream.writeQueueSize > maxBufferBytes {
            close(reason: "slow reader: more than \(maxBufferBytes) bytes waiting to be read")
            return
        }
        if let error = stream.write(buffer, completion: { [weak self] error in
            if let error { self?.close(reason: "write failed: \(error)") }
        }) {
            close(reason: "write failed: \(error)")
        }
    }

    private func checkBudget() {
        if heldBytes + stream.writeQueueSize > maxBufferBytes {
            close(reason: "slow reader: more than \(maxBufferBytes) bytes waiting to be read")
        }
    }

    /// Sends what can be sent, then hangs up (after a fatal protocol error, at shutdown).
    /// Responses still waiting on the disk are dropped with the connection.
    func finish(reason: String?) {
        guard !isClosed else { return }
        stream.stopReading()
        for slot in held { if let buffer = slot.buffer { write(buffer) } }
        held = []
        heldBytes = 0
        guard !isClosed else { return }
        // Held strongly: a refused client belongs to nobody else, and its socket must still close.
        stream.shutdown { self.close(reason: reason) }
    }

    func close(reason: String?) {
        guard !isClosed else { return }
        isClosed = true
        held = []
        heldBytes = 0
        stream.close()
        let onClose = self.onClose
        self.onClose = nil
        onClose?(self, reason)
    }
}
