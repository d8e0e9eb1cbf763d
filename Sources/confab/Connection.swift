#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Posix
import Terminal

/// Something the daemon sent, in arrival order: `RPCClientCore`'s events, less the frames the
/// connection sends back itself.
enum Event {
    /// A notification this version knows, decoded; others are dropped as they arrive.
    case notification(ServerNotification)
    case response(id: Int, result: Result<JSON, RPCError>)
    /// An error the daemon could not tie to a request (id null): framing is lost or our
    /// frame was unreadable. Nothing good follows it.
    case fatal(RPCError)
}

/// One blocking connection to confabd: `RPCClientCore` frames the requests and reads what
/// comes back; this reads and writes the socket. An answer is taken by its id, and whatever
/// else arrives meanwhile waits in `events`, in order, for the caller.
final class Connection {
    let fd: Int32
    let path: String
    private var core = RPCClientCore(maxLineBytes: 64 << 20)
    private var events: [Event] = []
    private var head = 0
    /// Answers to `sendEncoded` requests, by id, until they are taken.
    private var encodedAnswers: [Int: EncodedAnswer] = [:]
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private(set) var isClosed = false
    /// A `hello` sent without waiting (see `start`): the first answer waited for settles it.
    private var pendingHello: Int?

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { Files.close(fd) }

    /// Connects to the daemon at `path`, and only to a daemon of ours: anyone can put a
    /// socket where we look when we look somewhere shared, and whoever answers there reads
    /// what we send and writes to our terminal.
    static func open(path: String) throws(Failure) -> Connection {
        try DaemonTrust.checkFallbackDirectory(of: path)
        let fd: Int32
        do {
            fd = try UnixSocket.connect(to: path)
        } catch {
            throw .unreachable(path: path, errno: error.code)
        }
        let connection = Connection(fd: fd, path: path)
        try DaemonTrust.checkPeer(fd, path: path)
        return connection
    }

    // MARK: Sending

    /// Sends a request and returns its id without waiting for the answer.
    @discardableResult
    func send(_ method: RPCMethod, _ params: JSON = [:]) throws(Failure) -> Int {
        let (id, frame) = core.request(method, params)
        try write(frame)
        return id
    }

    private func write(_ frame: [UInt8]) throws(Failure) {
        if isClosed { throw .disconnected }
        let failure = frame.withUnsafeBytes { UnixSocket.sendAll(fd, $0) }
        if failure != nil {
            // EPIPE, ECONNRESET and friends: the daemon has gone away.
            isClosed = true
            throw .disconnected
        }
    }

    /// Sends a request and waits for its answer; notifications that arrive meanwhile are
    /// kept, in order, for `nextEvent`.
    func call(_ method: RPCMethod, _ params: JSON = [:]) throws(Failure) -> JSON {
        try answer(to: send(method, params))
    }

    /// Sends a request whose successful answer is wanted as its bytes (`answerEncoded`).
    func sendEncoded(_ method: RPCMethod, _ params: JSON) throws(Failure) -> Int {
        let (id, frame) = core.requestEncoded(method, params)
        try write(frame)
        return id
    }

    /// Waits for the answer to a request sent with `sendEncoded`: its bytes, or its error.
    func answerEncoded(to id: Int) throws(Failure) -> EncodedAnswer {
        try settleHello()
        while true {
            if let answer = encodedAnswers.removeValue(forKey: id) { return answer }
            var index = head
            while index < events.count {
                switch events[index] {
                case .response(let answered, let result) where answered == id:
                    events.remove(at: index)
                    if case .failure(let error) = result { throw .rpc(error) }
                    throw .message("confabd's answer to request \(id) could not be read")
                case .fatal(let error):
                    throw .rpc(error)
                default:
                    index += 1
                }
            }
            guard try receive() else { throw .disconnected }
        }
    }

    /// Sends a method's typed params without waiting; the answer comes as an event.
    func send<Call: RPCCall>(_: Call.Type, _ params: Call.Params) throws(Failure) -> Int {
        let (id, frame) = core.request(Call.self, params)
        try write(frame)
        return id
    }

    /// A method's typed call: its params written and its answer read by their types.
    func call<Call: RPCCall>(_ call: Call.Type, _ params: Call.Params) throws(Failure) -> Call.Result {
        try Self.read(call, self.call(Call.method, params.json))
    }

    /// The typed answer to `Call`, from its raw result (kept too, by a command's `--json`).
    static func read<Call: RPCCall>(_: Call.Type, _ result: JSON) throws(Failure) -> Call.Result {
        do throws(RPCClientCore.UnreadableAnswer) {
            return try RPCClientCore.decode(Call.self, result)
        } catch {
            throw .message("confabd's answer to \(Call.method.rawValue) is not one this confab reads: \(error.problem.message)")
        }
    }

    /// Waits for the typed answer to a request sent earlier with `send(Call.self, …)`.
    func answer<Call: RPCCall>(_ call: Call.Type, to id: Int) throws(Failure) -> Call.Result {
        try Self.read(call, answer(to: id))
    }

    /// Waits for the answer to a request sent earlier with `send`, so that several requests
    /// can be on their way at once.
    func answer(to id: Int) throws(Failure) -> JSON {
        try settleHello()
        while true {
            var index = head
            while index < events.count {
                switch events[index] {
                case .response(let answered, let result) where answered == id:
                    events.remove(at: index)
                    switch result {
                    case .success(let value): return value
                    case .failure(let error): throw .rpc(error)
                    }
                case .fatal(let error):
                    throw .rpc(error)
                default:
                    index += 1
                }
            }
            guard try receive() else { throw .disconnected }
        }
    }

    // MARK: Receiving

    /// The oldest event not yet taken, without reading the socket.
    func nextEvent() -> Event? {
        guard head < events.count else { return nil }
        let event = events[head]
        head += 1
        if head == events.count {
            events.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 4096 {
            events.removeFirst(head)
            head = 0
        }
        return event
    }

    /// One blocking read; frames go to `events`. False at end of stream.
    func receive() throws(Failure) -> Bool {
        if isClosed { return false }
        let count = buffer.withUnsafeMutableBytes { raw in (try? Files.read(fd, into: raw)) ?? -1 }
        if count <= 0 {
            // 0 is an orderly close; an error (ECONNRESET) means the same to us.
            isClosed = true
            return false
        }
        var received: Result<[RPCClientCore.Event], LineFramer.Failure> = .success([])
        buffer.withUnsafeBytes { raw in
            do throws(LineFramer.Failure) {
                received = .success(try core.receive(UnsafeRawBufferPointer(rebasing: raw[0..<count])))
            } catch {
                received = .failure(error)
            }
        }
        guard case .success(let arrived) = received else {
            isClosed = true
            throw .message("confabd sent a line longer than \(core.maxLineBytes) bytes")
        }
        for event in arrived {
            switch event {
            case .notification(let notification): events.append(.notification(notification))
            case .answer(let id, let result): events.append(.response(id: id, result: result))
            case .encodedAnswer(let id, let answer): encodedAnswers[id] = answer
            case .fatal(let error): events.append(.fatal(error))
            case .send(let frame): try? write(frame)
            }
        }
        return true
    }

    // MARK: The usual opening

    /// `hello`, as every command starts. Commands others see (`ask` writes messages,
    /// `attach` is present) offer a display name: `name`, else `CONFAB_NAME`, else
    /// `login@tty`; the others offer none, so a bad `CONFAB_NAME` cannot break `ls`.
    @discardableResult
    func hello(command: String, name explicit: String? = nil) throws(Failure) -> HelloResult {
        var params = HelloParams(client: "confab-\(command)")
        var source = "--name"
        if Self.offersName(command) {
            var name = explicit
            if name == nil, let variable = Environment.get("CONFAB_NAME") {
                name = variable
                source = "CONFAB_NAME"
            }
            if let name {
                if let problem = DisplayName.problem(name) { throw .usage("\(source)=\"\(SafeText.singleLine(name))\": \(problem)", command: command) }
                params.name = name
            } else if let name = DisplayName.default() {
                params.name = name
            }
        }
        do throws(Failure) {
            return try call(HelloCall.self, params)
        } catch {
            if case .rpc(let refusal) = error, refusal.code == RPCError.invalidParams, params.name != nil {
                throw .usage("\(source): \(refusal.message)", command: command)
            }
            throw error
        }
    }

    /// Connects to the socket from the options and says hello. A command that offers no
    /// display name has nothing in its hello for the daemon to refuse, so it does not wait
    /// for the answer: its first request goes out behind the hello, and a one-request
    /// command like `ls` pays one round trip to the daemon instead of two.
    static func start(_ path: String, command: String, name: String? = nil) throws(Failure) -> Connection {
        let connection = try open(path: path)
        if !offersName(command) {
            connection.pendingHello = try connection.send(HelloCall.self, HelloParams(client: "confab-\(command)"))
        } else {
            try connection.hello(command: command, name: name)
        }
        return connection
    }

    /// Whether `command` is one that others see, and so says who is there.
    private static func offersName(_ command: String) -> Bool { command == "ask" || command == "attach" }

    /// Reads the answer to a hello sent by `start`, which comes before any other answer.
    private func settleHello() throws(Failure) {
        guard let id = pendingHello else { return }
        pendingHello = nil
        _ = try answer(to: id)
    }

    /// A conversation id from what the user typed: a whole id, or a unique prefix of at
    /// least 4 characters, found by listing conversations.
    func resolveConversation(_ given: String) throws(Failure) -> String {
        let typed = given.lowercased()
        if ConversationID.isValid(typed) { return typed }
        guard typed.count >= 4, ConversationID.isValidPrefix(typed) else {
            throw .message("not a conversation id: \"\(given)\" (give the id or a unique prefix of at least 4 characters)")
        }
        let ids = try call(ListCall.self, ListParams(limit: 10000)).conversations.map(\.id)
        let matches = ids.filter { $0.hasPrefix(typed) }
        switch matches.count {
        case 1: return matches[0]
        case 0: throw .message("no conversation id starts with \"\(given)\"")
        default:
            let shown = matches.prefix(5).joined(separator: ", ") + (matches.count > 5 ? ", …" : "")
            throw .message("\"\(given)\" is ambiguous: \(matches.count) conversations match (\(shown))")
        }
    }
}

/// Who the client agrees to talk to: a daemon running as its own user, or as the one user
/// named in `CONFAB_DAEMON_USER` (a shared daemon whose `access.allow_uids` lists us).
enum DaemonTrust {
    /// `/tmp/confab-$UID` is where we look without `XDG_RUNTIME_DIR` (a plain ssh login).
    /// /tmp is everybody's: another user may have made that directory first, and put a
    /// socket of theirs in it. We use it only when it is ours and closed to everyone else.
    static func checkFallbackDirectory(of path: String) throws(Failure) {
        let fallback = "/tmp/confab-\(getuid())"
        guard path.hasPrefix(fallback + "/") else { return }
        let info: FileStatus
        do {
            info = try Files.status(path: fallback, followingLinks: false)
        } catch {
            if error.code == ENOENT { return }  // Nothing there: connecting says so.
            throw .refused("cannot check \(fallback): \(errorText(error.code))")
        }
        guard info.kind == .directory else {
            throw .refused("refusing \(fallback): it is not a directory (a symlink or a file); remove it and start confabd again")
        }
        guard info.owner == getuid() else {
            throw .refused("refusing \(fallback): it belongs to \(describe(uid: info.owner)), not to you (\(describe(uid: getuid()))); "
                + "another user may be pretending to be confabd there. Set XDG_RUNTIME_DIR or CONFAB_SOCKET, or have it removed")
        }
        let mode = mode_t(info.permissions & 0o777)
        guard mode & 0o077 == 0 else {
            throw .refused("refusing \(fallback): its mode is \(octal(mode)), and it must be 0700 (yours alone); "
                + "check what is in it, then: chmod 700 \(fallback)")
        }
    }

    /// The kernel says who listens on the socket (SO_PEERCRED): it must be us, or the user
    /// `CONFAB_DAEMON_USER` names.
    static func checkPeer(_ fd: Int32, path: String) throws(Failure) {
        let peer: UnixSocket.PeerCredentials
        do {
            peer = try UnixSocket.peerCredentials(of: fd)
        } catch {
            throw .refused("cannot tell who serves \(path): \(error)")
        }
        if peer.uid == getuid() { return }
        let expected = try sharedDaemonUID()
        if let expected, peer.uid == expected { return }
        var text = "refusing \(path): it is served by \(describe(uid: peer.uid)) (pid \(peer.pid)), not by you (\(describe(uid: getuid())))"
        if let expected {
            text += " nor by \(describe(uid: expected)) as CONFAB_DAEMON_USER says"
        } else {
            text += "; to use a daemon another user shares with you, set CONFAB_DAEMON_USER to that user"
        }
        throw .refused(text)
    }

    /// `CONFAB_DAEMON_USER`: a login or a uid; nil when unset.
    private static func sharedDaemonUID() throws(Failure) -> UInt32? {
        guard let value = Environment.get("CONFAB_DAEMON_USER"), !value.isEmpty else { return nil }
        if let uid = UInt32(value) { return uid }
        // /etc/passwd alone: the static client must not load NSS modules (see PasswdFile).
        guard let uid = PasswdFile.uid(of: value) else {
            throw .refused("CONFAB_DAEMON_USER=\(value): no such user in /etc/passwd (give a uid, or a login listed there)")
        }
        return uid
    }

    static func describe(uid: UInt32) -> String {
        PasswdFile.login(of: uid).map { "uid \(uid) (\($0))" } ?? "uid \(uid)"
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// The name others see for us.
enum DisplayName {
    /// What is wrong with `name` as a display name, or nil: the daemon takes 1 to 128 bytes
    /// of printable characters (and says itself what else it refuses).
    static func problem(_ name: String) -> String? {
        if name.isEmpty { return "a display name cannot be empty" }
        if name.utf8.count > 128 { return "a display name is at most 128 bytes" }
        if name.unicodeScalars.contains(where: SafeText.needsReplacing) || name.contains("\n") || name.contains("\t") {
            return "a display name cannot hold control characters or line breaks"
        }
        return nil
    }

    /// `login@pts/3`: who, and at which terminal; nil without a terminal on stdin. Who is
    /// `$USER`, else /etc/passwd's name for our uid, else the uid: never an NSS lookup.
    static func `default`() -> String? {
        guard let path = TerminalDevice.path(of: 0) else { return nil }
        let login = [Environment.get("USER"), Environment.get("LOGNAME")].compactMap { $0 }.first { problem($0) == nil && !$0.contains("@") }
            ?? PasswdFile.login(of: getuid()) ?? "uid\(getuid())"
        var tty = path
        if tty.hasPrefix("/dev/") { tty.removeFirst(5) }
        return String("\(login)@\(tty)".prefix(64))
    }
}
