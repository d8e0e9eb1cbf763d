#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Terminal

/// attach's standard output: whole messages and notices, and replies that grow in place,
/// wrapped at the terminal's width by display width. Whenever something else must be
/// printed while a reply's line is open, the line is broken first, and the reply picks up
/// on a fresh line when more of it arrives.
///
/// Text from others and from the model is made safe (`SafeText`) before it is measured
/// and printed; the only escape sequences written are our own colours, and none at all
/// without `colour`.
final class Transcript {
    private struct Reply {
        var created: Timestamp
        /// The content printed so far.
        var printed: [UInt8] = []
        var headerShown = false
        var wrapper: Wrapper
    }

    private let colour: Bool
    private let me: String
    private var width: Int
    private var replies: [String: Reply] = [:]
    /// Replies already shown whole, so that a late or repeated announcement is not shown again.
    private var finished: Set<String> = []
    private var cancelledBy: [String: String] = [:]
    /// The reply whose text is the last thing on standard output, if any.
    private var current: String?
    private var atLineStart = true
    private let sharedTerminal = isatty(1) != 0 && isatty(2) != 0

    init(colour: Bool, me: String) {
        self.colour = colour
        self.me = me
        width = Self.terminalWidth()
    }

    /// The terminal's width; no wrapping at all into a pipe or a file.
    private static func terminalWidth() -> Int { TerminalSize.of(1)?.columns ?? Int.max / 2 }

    var replyInFlight: Bool { !replies.isEmpty }

    func resized() { width = screen?.columns ?? Self.terminalWidth() }

    /// Another conversation: nothing of this one's state carries over.
    func reset() {
        breakLine()
        replies = [:]
        finished = []
        cancelledBy = [:]
    }

    // MARK: Styles

    private enum Tone: String {
        case mine = "1;32", other = "1;36", assistant = "1;35", quiet = "2", error = "31", title = "1"
    }

    private func styled(_ text: String, _ tone: Tone) -> String {
        colour ? "\u{1B}[\(tone.rawValue)m" + text + "\u{1B}[0m" : text
    }

    // MARK: Writing

    /// Where output goes: standard output, or the chat screen's region.
    var screen: ChatScreen? {
        didSet { resized() }
    }

    private func emit(_ text: String) {
        guard !text.isEmpty else { return }
        if let screen { screen.output(text) } else { Out.stdout(text) }
        atLineStart = text.utf8.last == 0x0A
    }

    /// Ends an open line, so that what comes next starts on its own.
    func breakLine() {
        if let current, var reply = replies[current] {
            emit(reply.wrapper.flush())
            replies[current] = reply
        }
        if !atLineStart { emit("\n") }
        current = nil
    }

    /// The terminal echoed a typed line: the cursor sits at the start of a line, and a reply
    /// that goes on must say so again.
    func inputEchoed() {
        if let current, var reply = replies[current] {
            _ = reply.wrapper.flush()
            replies[current] = reply
        }
        atLineStart = true
        current = nil
    }

    func header(_ title: String, who: String) {
        breakLine()
        emit(styled("== \(SafeText.singleLine(title)) ==", .title) + "\n")
        emit(styled(SafeText.singleLine(who), .quiet) + "\n")
    }

    /// `-- text --`, quietly.
    func notice(_ text: String) {
        breakLine()
        emit(styled("-- \(SafeText.singleLine(text)) --", .quiet) + "\n")
    }

    /// Something of ours (help), as it is.
    func block(_ text: String) {
        breakLine()
        emit(text + "\n")
    }

    /// An error: on stderr, after breaking the reply's line when both share a terminal.
    func error(_ text: String) {
        if screen != nil {
            breakLine()
            emit(styled("confab: \(SafeText.sanitized(text))", .error) + "\n")
            return
        }
        if sharedTerminal { breakLine() }
        Out.errorLine(colour ? "\u{1B}[31mconfab: \(SafeText.sanitized(text))\u{1B}[0m" : "confab: \(text)")
    }

    /// `[14:03] ana@pts/3: ` in the author's colour; its width.
    private func prefix(_ created: Timestamp, _ name: String, _ tone: Tone) -> (text: String, width: Int) {
        let time = "[\(LocalTime.clock(created))] "
        let who = SafeText.singleLine(name) + ":"
        return (styled(time, .quiet) + styled(who, tone) + " ", DisplayWidth.of(time) + DisplayWidth.of(who) + 1)
    }

    private func tone(of message: JSON) -> Tone {
        if message["role"]?.string == "assistant" { return .assistant }
        return message["author"]?["client_id"]?.string == me ? .mine : .other
    }

    /// `[cancelled by ana]`, `[failed: why]`, …; nil for a complete message.
    private func marker(_ message: JSON, error: String?) -> (text: String, tone: Tone)? {
        let id = message["id"]?.string ?? ""
        let text: String
        switch error != nil ? "failed" : message["status"]?.string {
        case nil, "complete"?, "streaming"?: return nil
        case "failed"?: text = "[failed: \(error ?? Words.replyError(message["error"]))]"
        case "cancelled"?: text = "[cancelled" + (cancelledBy[id].map { " by \($0)" } ?? "") + "]"
        case let other?: text = "[\(other)]"
        }
        return (SafeText.singleLine(text), error != nil || message["status"]?.string == "failed" ? .error : .quiet)
    }

    /// The marker after the text, on the same row when it fits, else on the next.
    private func emit(_ marker: (text: String, tone: Tone)?, after wrapper: Wrapper) {
        guard let marker else { return }
        let fits = wrapper.column + 1 + DisplayWidth.of(marker.text) <= width
        emit((atLineStart ? "" : fits ? " " : "\n") + styled(marker.text, marker.tone))
    }

    // MARK: Messages

    /// A whole message: history, and user messages as they are stored. `error` is the
    /// reason a reply failed, when it came beside the message rather than in it.
    func message(_ message: JSON, error: String? = nil) {
        let created = LocalTime.parse(message["created"])
        let isUser = message["role"]?.string != "assistant"
        let name = isUser ? (message["author"]?["name"]?.string ?? message["author"]?["login"]?.string ?? "user") : "assistant"
        if !isUser, let id = message["id"]?.string { finished.insert(id) }
        breakLine()
        let head = prefix(created, name, tone(of: message))
        var wrapper = Wrapper(width: width, column: head.width)
        emit(head.text + wrapper.feed(SafeText.sanitized(message["content"]?.string ?? "")) + wrapper.flush())
        emit(marker(message, error: error), after: wrapper)
        if !atLineStart { emit("\n") }
    }

    /// A reply begins (or is in flight when we attach). Its header waits for its first
    /// text, so a reply that has said nothing yet leaves no empty line behind.
    func replyStarted(_ message: JSON) {
        guard let id = message["id"]?.string, replies[id] == nil, !finished.contains(id) else { return }
        replies[id] = Reply(created: LocalTime.parse(message["created"]), wrapper: Wrapper(width: width))
        let content = message["content"]?.string ?? ""
        if !content.isEmpty { delta(id: id, content) }
    }

    func delta(id: String, _ piece: String) {
        guard !piece.isEmpty, !finished.contains(id) else { return }
        if replies[id] == nil { replies[id] = Reply(created: Timestamp.now(), wrapper: Wrapper(width: width)) }
        open(id)
        guard var reply = replies[id] else { return }
        let text = reply.wrapper.feed(SafeText.sanitized(piece))
        reply.printed += Array(piece.utf8)
        replies[id] = reply
        emit(text)
    }

    /// Makes `id` the reply whose line is open: a header, or a "continued" one.
    private func open(_ id: String) {
        guard current != id, var reply = replies[id] else { return }
        breakLine()
        let head = prefix(reply.created, reply.headerShown ? "assistant (continued)" : "assistant", .assistant)
        reply.headerShown = true
        reply.wrapper = Wrapper(width: width, column: head.width)
        replies[id] = reply
        emit(head.text)
        current = id
    }

    /// A stored reply goes on (`message.continued`): its text is on the screen already, so
    /// what streams now is appended under a "continued" header.
    func replyContinued(_ message: JSON) {
        guard let id = message["id"]?.string, replies[id] == nil else { return }
        finished.remove(id)
        var reply = Reply(created: LocalTime.parse(message["created"]), wrapper: Wrapper(width: width))
        reply.printed = Array((message["content"]?.string ?? "").utf8)
        reply.headerShown = true
        replies[id] = reply
    }

    func cancelled(id: String, by name: String) {
        cancelledBy[id] = name
    }

    /// A reply is over: whatever of it we have not shown, its marker, and the end of its line.
    func replyEnded(_ message: JSON, error: String?) {
        guard let id = message["id"]?.string, !finished.contains(id) else { return }
        guard let reply = replies[id] else {
            // Never saw it start: print it whole.
            self.message(message, error: error)
            return
        }
        let content = Array((message["content"]?.string ?? "").utf8)
        var rest: [UInt8] = []
        if content.count > reply.printed.count, content.starts(with: reply.printed) {
            rest = Array(content[reply.printed.count...])
        }
        let mark = marker(message, error: error)
        if current == id || !rest.isEmpty || mark != nil || !reply.headerShown {
            open(id)
            if var open = replies[id] {
                emit(open.wrapper.feed(SafeText.sanitized(String(decoding: rest, as: UTF8.self))) + open.wrapper.flush())
                emit(mark, after: open.wrapper)
                replies[id] = open
            }
        }
        replies[id] = nil
        finished.insert(id)
        if current == id {
            if !atLineStart { emit("\n") }
            current = nil
        }
    }
}
