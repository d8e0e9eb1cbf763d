#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Terminal

struct Attach: ClientCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a conversation live; every line typed is sent to it.",
        discussion: "Ctrl-D (end of input) detaches. Ctrl-C leaves too; a reply in flight goes on in the daemon.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).") var id: String
    @Option(help: "How many earlier messages to show (0…1000).") var history = 20

    func validate() throws {
        if !(0...1000).contains(history) { throw ValidationError("--history must be between 0 and 1000") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "attach")
        let conversation = try connection.resolveConversation(id)
        let attached = try connection.call("conversation.attach",
                                           ["conversation": .string(conversation), "history": .int(history)])
        let session = AttachSession(connection: connection, conversation: conversation)
        session.show(attached)
        try session.run()
    }
}

/// The live part of `confab attach`: one poll loop over the socket and standard input.
final class AttachSession {
    let connection: Connection
    let conversation: String
    let transcript = Transcript()
    /// Requests sent and not yet answered: id → method.
    private var outstanding: [Int: String] = [:]
    private var input: [UInt8] = []
    private var inputOpen = true
    /// Standard input and output are one terminal in line mode, which echoes typed lines.
    private let echoing = isatty(0) != 0 && isatty(1) != 0

    init(connection: Connection, conversation: String) {
        self.connection = connection
        self.conversation = conversation
    }

    /// The title, the history and the reply in flight, from the attach result.
    func show(_ result: JSON) {
        let info = result["conversation"]
        let title = info?["title"]?.string ?? "untitled"
        transcript.notice("== \(title) (\(conversation)) ==")
        for message in result["messages"]?.array ?? [] {
            transcript.message(message)
        }
        let others = (result["clients"]?.array ?? []).compactMap { $0["name"]?.string }
        if !others.isEmpty {
            transcript.notice("-- also here: \(others.joined(separator: ", ")) --")
        }
        if let pending = result["pending"], pending["id"]?.string != nil {
            transcript.replyStarted(pending)
        }
    }

    func run() throws(Failure) {
        while true {
            // Everything already read is handled before waiting for more.
            while let event = connection.nextEvent() { try handle(event) }
            if !inputOpen && outstanding.isEmpty { detach() }

            var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)]
            if inputOpen { fds.append(pollfd(fd: 0, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                throw .message("poll failed: \(errorText(errno))")
            }
            if fds[0].revents != 0 {
                if !(try connection.receive()) {
                    transcript.breakLine()
                    throw .disconnected
                }
            }
            if inputOpen, fds[1].revents != 0 { try readInput() }
        }
    }

    private func handle(_ event: Event) throws(Failure) {
        switch event {
        case .notification(let method, let params):
            try notification(method, params)
        case .response(let id, let result):
            guard let method = outstanding.removeValue(forKey: id) else { return }
            if case .failure(let error) = result {
                transcript.errorLine("confab: \(method == "message.send" ? "not sent: " : "")\(error.message)")
            }
        case .fatal(let error):
            transcript.breakLine()
            throw .rpc(error)
        }
    }

    private func notification(_ method: String, _ params: JSON) throws(Failure) {
        if method == "server.stopping" {
            let reason = params["reason"]?.string.map { ": \($0)" } ?? ""
            transcript.notice("-- confabd is stopping\(reason) --")
            throw .exit(0)
        }
        // Everything else is about one conversation; we follow only ours.
        guard params["conversation"]?.string == conversation else { return }
        switch method {
        case "message.created":
            guard let message = params["message"] else { return }
            if message["role"]?.string == "assistant" && message["status"]?.string == "streaming" {
                transcript.replyStarted(message)
            } else {
                transcript.message(message)
            }
        case "message.delta":
            guard let id = params["message"]?.string, let piece = params["content"]?.string else { return }
            transcript.delta(id: id, piece)
        case "message.completed":
            guard let message = params["message"] else { return }
            transcript.replyEnded(message, error: nil)
        case "message.failed":
            guard let message = params["message"] else { return }
            let reason = params["error"]?["message"]?.string ?? message["error"]?["message"]?.string ?? "unknown error"
            transcript.replyEnded(message, error: reason)
        case "conversation.updated":
            let title = params["info"]?["title"]?.string ?? "?"
            transcript.notice("-- title: \(title) --")
        case "conversation.deleted":
            transcript.notice("-- conversation deleted --")
            throw .exit(0)
        case "client.attached":
            transcript.notice("-- \(Self.name(params["client"])) attached --")
        case "client.detached":
            transcript.notice("-- \(Self.name(params["client"])) detached --")
        default:
            return
        }
    }

    private static func name(_ client: JSON?) -> String {
        client?["name"]?.string ?? client?["login"]?.string ?? client?["id"]?.string ?? "someone"
    }

    // MARK: Input

    private func readInput() throws(Failure) {
        var chunk = [UInt8](repeating: 0, count: 1 << 14)
        let count = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { return }
            inputOpen = false
        } else if count == 0 {
            inputOpen = false
        } else {
            input += chunk[0..<count]
            // The terminal has echoed what was typed, newline included: the cursor is at
            // the start of a fresh line, whatever we had printed before.
            if echoing, input.last == 0x0A { transcript.inputEchoed() }
        }
        while let newline = input.firstIndex(of: 0x0A) {
            let line = Array(input[..<newline])
            input.removeSubrange(...newline)
            try sendLine(line)
        }
        if !inputOpen, !input.isEmpty {
            // The last line had no newline; it is a line all the same.
            let line = input
            input = []
            try sendLine(line)
        }
    }

    private func sendLine(_ bytes: [UInt8]) throws(Failure) {
        var bytes = bytes
        if bytes.last == 0x0D { bytes.removeLast() }
        let text = String(decoding: bytes, as: UTF8.self)
        if text.isBlank { return }
        // Not printed here: the daemon echoes it back as message.created.
        let id = try connection.send("message.send", ["conversation": .string(conversation), "content": .string(text)])
        outstanding[id] = "message.send"
    }

    /// End of input, and every send answered: detach and leave.
    private func detach() -> Never {
        transcript.breakLine()
        _ = try? connection.call("conversation.detach", ["conversation": .string(conversation)])
        Out.exit(0)
    }
}

/// attach's standard output: whole lines for messages and notices, and replies that grow
/// in place. Whenever something else must be printed while a reply's line is open, the line
/// is broken first, and the reply picks up on a fresh line when more of it arrives.
final class Transcript {
    private struct Reply {
        var created: Timestamp
        /// The content printed so far.
        var printed: [UInt8] = []
    }

    private var replies: [String: Reply] = [:]
    /// Replies already shown whole, so that a late or repeated announcement is not shown again.
    private var finished: Set<String> = []
    /// The reply whose text is the last thing on standard output, if any.
    private var current: String?
    private var atLineStart = true
    private let sharedTerminal = isatty(1) != 0 && isatty(2) != 0

    /// Everything attach prints passes here: what others and the model wrote never reaches
    /// the terminal as a control character.
    private func emit(_ text: String) {
        guard !text.isEmpty else { return }
        Out.stdout(SafeText.sanitized(text))
        atLineStart = text.utf8.last == 0x0A
    }

    /// Ends an open line, so that what comes next starts on its own.
    func breakLine() {
        if !atLineStart { emit("\n") }
        current = nil
    }

    /// The terminal echoed a typed line: the cursor sits at the start of a line, and a reply
    /// that goes on must say so again.
    func inputEchoed() {
        atLineStart = true
        current = nil
    }

    func notice(_ text: String) {
        breakLine()
        emit(text + "\n")
    }

    /// An error for stderr; when both go to the same terminal, the reply's line is broken first.
    func errorLine(_ text: String) {
        if sharedTerminal { breakLine() }
        Out.errorLine(text)
    }

    private static func prefix(_ created: Timestamp, _ name: String) -> String {
        "[\(LocalTime.clock(created))] \(name): "
    }

    /// ` [cancelled]`, ` [failed: why]`, …; nothing for a complete message.
    private static func marker(_ message: JSON, error: String?) -> String {
        let reason = error ?? message["error"]?["message"]?.string
        switch error != nil ? "failed" : message["status"]?.string {
        case nil, "complete"?, "streaming"?: return ""
        case "failed"?: return " [failed\(reason.map { ": \($0)" } ?? "")]"
        case let other?: return " [\(other)]"
        }
    }

    /// A whole message: history, and user messages as they are stored. `error` is the
    /// reason a reply failed, when it came beside the message rather than in it.
    func message(_ message: JSON, error: String? = nil) {
        let created = LocalTime.parse(message["created"])
        let isUser = message["role"]?.string != "assistant"
        let name = isUser ? (message["author"]?["name"]?.string ?? message["author"]?["login"]?.string ?? "user") : "assistant"
        let content = message["content"]?.string ?? ""
        if !isUser, let id = message["id"]?.string { finished.insert(id) }
        var mark = Self.marker(message, error: error)
        if content.utf8.last == 0x0A, mark.hasPrefix(" ") { mark.removeFirst() }
        breakLine()
        emit(Self.prefix(created, name) + content + mark)
        if !atLineStart { emit("\n") }
    }

    /// A reply begins (or is in flight when we attach): its line opens and stays open.
    func replyStarted(_ message: JSON) {
        guard let id = message["id"]?.string, replies[id] == nil, !finished.contains(id) else { return }
        let created = LocalTime.parse(message["created"])
        let content = message["content"]?.string ?? ""
        breakLine()
        emit(Self.prefix(created, "assistant") + content)
        replies[id] = Reply(created: created, printed: Array(content.utf8))
        current = id
    }

    func delta(id: String, _ piece: String) {
        guard !piece.isEmpty, !finished.contains(id) else { return }
        if current != id {
            breakLine()
            if let reply = replies[id] {
                emit(Self.prefix(reply.created, "assistant (continued)"))
            } else {
                // A reply we never saw start: begin it here.
                let now = Timestamp.now()
                replies[id] = Reply(created: now)
                emit(Self.prefix(now, "assistant"))
            }
            current = id
        }
        emit(piece)
        replies[id]?.printed += Array(piece.utf8)
    }

    /// A reply is over: whatever of it we have not shown, its marker, and the end of its line.
    func replyEnded(_ message: JSON, error: String?) {
        guard let id = message["id"]?.string, !finished.contains(id) else { return }
        let content = Array((message["content"]?.string ?? "").utf8)
        var mark = Self.marker(message, error: error)
        guard let reply = replies.removeValue(forKey: id) else {
            // Never saw it start: print it whole.
            self.message(message, error: error)
            return
        }
        finished.insert(id)
        var rest: [UInt8] = []
        if content.count > reply.printed.count, content.starts(with: reply.printed) {
            rest = Array(content[reply.printed.count...])
        }
        if current != id {
            if rest.isEmpty && mark.isEmpty { return }
            breakLine()
            emit(Self.prefix(reply.created, "assistant (continued)"))
        }
        if !rest.isEmpty { emit(String(decoding: rest, as: UTF8.self)) }
        if atLineStart, mark.hasPrefix(" ") { mark.removeFirst() }
        emit(mark)
        breakLine()
    }
}
