#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Terminal

/// attach's standard output: whole messages and notices, and replies that grow in place,
/// wrapped at the terminal's width by display width.
///
/// Nothing is ever printed twice. While a reply's text streams, what others do (joins,
/// leaves, messages, a changed model, any notice of theirs) waits until the reply's turn
/// ends, and meanwhile the status row says it; only what this screen asked for (a
/// command's answer, an error) is printed at once. Then the reply's rows stay as they are
/// and it goes on below under `assistant (continued):` with its text from there on, never
/// again from a block's start. A resize leaves what was printed as the terminal reflows
/// it, and the reply goes on from a fresh row.
///
/// With `render`, the model's markdown is laid out (`MarkdownRenderer`): a reply's finished
/// blocks are final and the block it is writing is redrawn in place as it grows
/// (`MarkdownStream`, `LiveRows`), once per batch of deltas (`flush`). The chat screen's
/// status row, out of the scrolling region, says what a reply waits for (a countdown when
/// it is retried, its thinking, a tool) and what waits to be printed.
///
/// Text from others and from the model is made safe (`SafeText`) before it is measured
/// and printed; the only escape sequences written are our own colours and cursor
/// movements, and no colours without `colour`.
final class Transcript {
    private struct Reply {
        var created: Timestamp
        /// The content received so far.
        var printed: [UInt8] = []
        var headerShown = false
        var wrapper: Wrapper
        /// The rendering, when there is one.
        var markdown: MarkdownStream?
        /// Text came that is not on the screen yet.
        var pending = false
    }

    private let colour: Bool
    private let renderer: MarkdownRenderer?
    private let me: String
    /// The rows of the current reply that may still change.
    private var live = LiveRows()
    /// Replies with no text yet, and what their status says.
    private var waiting: [String: Spinner] = [:]
    /// What happened while a reply's text was streaming, printed once its turn ends, and
    /// how the status row sums each up meanwhile.
    private var held: [(summary: String, show: () -> Void)] = []
    private var width: Int
    private var replies: [String: Reply] = [:]
    /// Replies already shown whole, so that a late or repeated announcement is not shown again.
    private var finished: Set<String> = []
    /// Who stopped a reply, by the id of its first message (`m2` for `m2.3` too).
    private var cancelledBy: [String: String] = [:]
    /// The reply whose text is the last thing on standard output, if any.
    private var current: String?
    private var atLineStart = true
    private let sharedTerminal = isatty(1) != 0 && isatty(2) != 0

    init(colour: Bool, me: String, render: Bool) {
        // Before libedit starts, which reads the locale once: in C it would drop every
        // character that is not ASCII, the ↵ of a line break included.
        DisplayWidth.useUTF8Locale()
        self.colour = colour
        self.me = me
        renderer = render ? MarkdownRenderer(colour: colour) : nil
        width = Self.terminalWidth()
    }

    private func newReply(created: Timestamp) -> Reply {
        var markdown = renderer.map { MarkdownStream(renderer: $0, width: width, maxLiveRows: maxLiveRows) }
        // So that a reply interrupted or resized goes on at a word's start.
        markdown?.holdsPartialWords = true
        return Reply(created: created, wrapper: Wrapper(width: width), markdown: markdown)
    }

    /// How far up rows can still be redrawn: what the screen shows, less a row to spare.
    private var maxLiveRows: Int {
        max(1, (screen?.regionRows ?? TerminalSize.of(1)?.rows ?? 24) - 2)
    }

    /// The terminal's width; no wrapping at all into a pipe or a file.
    private static func terminalWidth() -> Int { TerminalSize.of(1)?.columns ?? Int.max / 2 }

    var replyInFlight: Bool { !replies.isEmpty }
    /// Whether this user may go on with a reply cut off at the length limit (a reader may not:
    /// the marker does not suggest it).
    var continuesReplies = true

    /// The window changed size. Rows already printed stay as the terminal reflows them; the
    /// reply being written goes on from a fresh row, laid out at the new width, with only
    /// what it had not shown yet.
    func resized() {
        width = screen?.columns ?? Self.terminalWidth()
        if let id = current, var reply = replies[id], reply.markdown != nil {
            if !atLineStart { emit("\n") }
            reply.markdown?.settle(firstColumn: 0)
            reply.pending = true
            replies[id] = reply
            live = LiveRows()
            drawPendingText()
        } else if let id = current, replies[id] != nil {
            breakLine()
            open(id)
        }
        redrawStatus()
    }

    /// Another conversation: nothing of this one's state carries over.
    func reset() {
        breakLine()
        replies = [:]
        waiting = [:]
        finished = []
        cancelledBy = [:]
        releaseHeld()
        redrawStatus()
    }

    /// Whether a reply's text has begun and not ended: whatever else comes meanwhile waits.
    private var replyTextOpen: Bool { replies.values.contains { $0.headerShown } }

    /// `show` now, or once the reply streaming now ends its turn; `summary` is what the
    /// status row says of it meanwhile.
    func whenFree(_ summary: String, _ show: @escaping () -> Void) {
        guard replyTextOpen else { return show() }
        held.append((summary, show))
        redrawStatus()
    }

    /// Prints what waited for the reply to end, in the order it came.
    private func releaseHeld() {
        guard !replyTextOpen, !held.isEmpty else { return }
        let now = held
        held = []
        for item in now { item.show() }
        redrawStatus()
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
        // The status row is the screen's to erase, before the terminal goes back to the shell.
        willSet { if newValue == nil { screen?.status("") } }
        didSet { resized() }
    }

    private func emit(_ text: String) {
        guard !text.isEmpty else { return }
        if let screen { screen.output(text) } else { Out.stdout(text) }
        atLineStart = text.utf8.last == 0x0A
    }

    /// Redrawn rows of the current reply; the cursor ends where `live` says.
    private func emitLive(_ text: String) {
        guard !text.isEmpty else { return }
        if let screen { screen.output(text, endingAt: live.column) } else { Out.stdout(text) }
        atLineStart = live.column == 0
    }

    /// Puts what has streamed in since the last call on the screen. Called once the events
    /// at hand are handled.
    func flush() {
        drawPendingText()
        redrawStatus()
    }

    private func drawPendingText() {
        guard let current, var reply = replies[current], reply.pending, var markdown = reply.markdown else { return }
        markdown.width = width
        markdown.maxLiveRows = maxLiveRows
        let update = markdown.update()
        reply.markdown = markdown
        reply.pending = false
        replies[current] = reply
        emitLive(live.replace(committing: update.committed, live: update.live))
    }

    /// Ends an open line, so that what comes next starts on its own.
    func breakLine() {
        if let current, var reply = replies[current] {
            if reply.markdown != nil {
                // Its rows stay as they are, final; the reply goes on from where they end.
                drawPendingText()
                replies[current]?.markdown?.settle(firstColumn: 0)
                live = LiveRows()
            } else {
                emit(reply.wrapper.flush())
                replies[current] = reply
            }
        }
        if !atLineStart { emit("\n") }
        current = nil
    }

    // MARK: Status

    /// A reply has begun and has no text yet.
    private func waitForText(_ id: String) {
        waiting[id] = Spinner("waiting for the model")
    }

    /// The daemon tries a reply again after `milliseconds`.
    func retrying(id: String, attempt: Int, reason: String, milliseconds: Int) {
        guard screen != nil else {
            notice("\(reason); retry \(attempt) in \(Spinner.seconds(milliseconds))")
            return
        }
        waiting[id] = Spinner("retry \(attempt) in", countdownMilliseconds: milliseconds,
                              then: "waiting for the model (retry \(attempt))", detail: reason)
        redrawStatus()
    }

    /// Reply `id` thinks: the status row folds its thought (`thinking… 12 s · newest line`),
    /// redrawn at each piece and each second, until its text starts. Never in the scrollback.
    func thinking(id: String, thought: Reasoning) {
        guard !finished.contains(id) else { return }
        if replies[id] == nil { replies[id] = newReply(created: Timestamp.now()) }
        waiting[id] = Spinner(thinking: thought)
        redrawStatus()
    }

    /// Reply `id` stopped thinking: its answer comes (or it ends), and the row waits for it.
    func thoughtEnded(id: String) {
        guard waiting[id]?.thought != nil else { return }
        waiting[id] = Spinner("waiting for the model")
        redrawStatus()
    }

    /// A reply's thought, printed once as a dim block under a quiet header (`/thinking`).
    func thought(_ text: String, header: String) {
        breakLine()
        emit(styled(TextRows.wrapped("-- \(SafeText.singleLine(header))", closing: " --", width: width, indent: 3), .quiet) + "\n")
        let block = ThoughtText.block(text, width: width, colour: colour)
        if !block.isEmpty { emit(block + "\n") }
    }

    private func stopWaiting(_ id: String) {
        guard waiting.removeValue(forKey: id) != nil else { return }
        redrawStatus()
    }

    /// How long poll may sleep before the status wants redrawing; -1 when nothing moves on it.
    var statusTickMilliseconds: Int32 { screen != nil && !waiting.isEmpty ? 100 : -1 }

    func tick() {
        guard screen != nil, !waiting.isEmpty else { return }
        for id in waiting.keys { waiting[id]?.advance() }
        redrawStatus()
    }

    /// The status row, on a chat screen only: what a reply waits for, else what waits to be
    /// printed until the reply streaming now ends (`bob joined · carol left`), else nothing.
    private func redrawStatus() {
        guard let screen else { return }
        var text = ""
        if let spinner = waiting.values.first {
            text = spinner.line
        } else if !held.isEmpty {
            // The newest first: it is the one to read when the row is too short for all.
            text = held.reversed().map(\.summary).joined(separator: " · ")
        }
        guard !text.isEmpty else { return screen.status("") }
        screen.status(styled(TextRows.firstRow(SafeText.singleLine(text), width: max(1, width - 1)), .quiet))
    }

    /// The terminal echoed a typed line: the cursor sits at the start of a line, and a reply
    /// that goes on must say so again.
    func inputEchoed() {
        if let current, var reply = replies[current] {
            _ = reply.wrapper.flush()
            reply.markdown?.settle(firstColumn: 0)
            replies[current] = reply
        }
        live = LiveRows()
        atLineStart = true
        current = nil
    }

    func header(_ title: String, who: String) {
        breakLine()
        emit(styled(TextRows.wrapped("== \(SafeText.singleLine(title))", closing: " ==", width: width, indent: 3), .title) + "\n")
        emit(styled(TextRows.wrapped(SafeText.singleLine(who), width: width, indent: 2), .quiet) + "\n")
    }

    /// The quick replies offered under a message, numbered as `/1`, `/2`… pick them: `[1] yes  [2] no`.
    func quickReplies(_ replies: [String]) {
        breakLine()
        let items = replies.enumerated().map { "[\($0.offset + 1)] \(SafeText.singleLine($0.element))" }
        emit(styled(TextRows.wrapped(items.joined(separator: "  "), width: width), .quiet) + "\n")
    }

    /// A notice of something others did: at once, or once the reply streaming now ends
    /// (the status row says it meanwhile).
    func news(_ text: String) {
        whenFree(text) { [weak self] in self?.notice(text) }
    }

    /// A line of ours across the transcript (where a summary stands), quietly.
    func rule(_ text: String) {
        breakLine()
        emit(styled(TextRows.wrapped(SafeText.singleLine(text), width: width, indent: 3), .quiet) + "\n")
    }

    /// `-- text --`, quietly.
    func notice(_ text: String) {
        breakLine()
        emit(styled(TextRows.wrapped("-- \(SafeText.singleLine(text))", closing: " --", width: width, indent: 3), .quiet) + "\n")
    }

    /// Something of ours (help), its lines wrapped between words; a line of two columns
    /// goes on under its second column.
    func block(_ text: String) {
        breakLine()
        let rows = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            TextRows.wrapped(String(line), width: width, indent: TextRows.secondColumn(of: String(line)))
        }
        emit(rows.joined(separator: "\n") + "\n")
    }

    /// An error: on stderr, after breaking the reply's line when both share a terminal.
    func error(_ text: String) {
        if screen != nil {
            breakLine()
            emit(styled(TextRows.wrapped("confab: \(SafeText.sanitized(text))", width: width, indent: 2), .error) + "\n")
            return
        }
        if sharedTerminal { breakLine() }
        Out.errorLine("confab: \(text)", red: colour)
    }

    /// `[14:03] ana@pts/3: ` in the author's colour; its width.
    private func prefix(_ created: Timestamp, _ name: String, _ tone: Tone) -> (text: String, width: Int) {
        let time = "[\(LocalTime.clock(created))] "
        let who = SafeText.singleLine(name) + ":"
        return (styled(time, .quiet) + styled(who, tone) + " ", DisplayWidth.of(time) + DisplayWidth.of(who) + 1)
    }

    private func tone(of message: Message) -> Tone {
        if message.role == .assistant { return .assistant }
        return message.author?.clientID == me ? .mine : .other
    }

    /// `[cancelled by ana]`, `[failed: why]`, the length limit's, …; nil for a complete message.
    private func marker(_ message: Message, error: String?) -> (text: String, tone: Tone)? {
        let id = message.id
        let text: String
        switch error != nil ? .failed : message.status {
        case .complete, .streaming:
            guard message.role == .assistant, message.isCutAtLengthLimit else { return nil }
            text = Self.lengthLimitMarker(conversation: message.conversation, mayContinue: continuesReplies)
        case .failed: text = "[failed: \(error ?? Words.replyError(message.error))]"
        case .cancelled: text = "[cancelled" + (cancelledBy[ToolLines.head(id) ?? id].map { " by \($0)" } ?? "") + "]"
        case .interrupted: text = "[\(message.status.rawValue)]"
        }
        return (SafeText.singleLine(text), error != nil || message.status == .failed ? .error : .quiet)
    }

    /// What a reply the model's token limit cut off says after its text, on every surface.
    /// Without `mayContinue` (a conversation shared with us read-only) it offers nothing.
    static func lengthLimitMarker(conversation: String, mayContinue: Bool = true) -> String {
        mayContinue ? "[cut off at the length limit: /continue, confab continue \(conversation)]" : "[cut off at the length limit]"
    }

    /// The marker after the text that ends at `column`, on the same row when it fits, else on the next.
    private func emit(_ marker: (text: String, tone: Tone)?, after column: Int) {
        guard let marker else { return }
        let fits = column + 1 + DisplayWidth.of(marker.text) <= width
        // On a row of its own, a long marker (a failure's reason) wraps between words too.
        let text = fits ? marker.text : TextRows.wrapped(marker.text, width: width, indent: 1)
        emit((atLineStart ? "" : fits ? " " : "\n") + styled(text, marker.tone))
    }

    // MARK: Messages

    /// A whole message: history, and user messages as they are stored. `error` is the
    /// reason a reply failed, when it came beside the message rather than in it.
    func message(_ message: Message, error: String? = nil) {
        if message.role == .tool {
            finished.insert(message.id)
            let outcome = ToolLines.outcome(of: message)
            toolLine(ToolLines.result(message, width: width), outcome.isFailure ? .error : .quiet)
            return
        }
        let created = message.created
        let isUser = message.role != .assistant
        let name = isUser ? Words.authorName(message) : Role.assistant.rawValue
        if !isUser { finished.insert(message.id) }
        breakLine()
        let content = message.content
        // A turn that only asked for tools is its calls' lines alone, without an empty header.
        let onlyCalls = content.isEmpty && message.continuesAfterTools && marker(message, error: error) == nil
        if !onlyCalls { writeMessage(message, name: name, created: created, isUser: isUser, content: content, error: error) }
        toolCalls(of: message)
    }

    private func writeMessage(_ message: Message, name: String, created: Timestamp, isUser: Bool, content: String, error: String?) {
        let head = prefix(created, name, tone(of: message))
        if !isUser, let renderer {
            let rows = renderer.render(content, width: width, firstColumn: head.width)
            emit(head.text + rows.joined(separator: "\n"))
            emit(marker(message, error: error), after: (rows.count <= 1 ? head.width : 0) + (rows.last.map(DisplayWidth.visible) ?? 0))
        } else {
            var wrapper = Wrapper(width: width, column: head.width)
            emit(head.text + wrapper.feed(SafeText.sanitized(content)) + wrapper.flush())
            emit(marker(message, error: error), after: wrapper.column)
        }
        if !atLineStart { emit("\n") }
        attachments(of: message)
    }

    /// `[attached: diagram.png, 212 KiB, image/png]` under the message, one line per file.
    private func attachments(of message: Message) {
        for attachment in message.attachments ?? [] {
            emit(styled(TextRows.wrapped(AttachmentText.line(attachment), width: width, indent: 2), .quiet) + "\n")
        }
    }

    /// A reply begins (or is in flight when we attach). Its header waits for its first
    /// text, so a reply that has said nothing yet leaves no empty line behind; its text so
    /// far (when we attach mid-reply) comes as a `delta`, as the follower reports it.
    func replyStarted(_ message: Message) {
        let id = message.id
        guard replies[id] == nil, !finished.contains(id) else { return }
        replies[id] = newReply(created: message.created)
        if message.content.isEmpty { waitForText(id) }
    }

    func delta(id: String, _ piece: String) {
        guard !piece.isEmpty, !finished.contains(id) else { return }
        if replies[id] == nil { replies[id] = newReply(created: Timestamp.now()) }
        stopWaiting(id)
        open(id)
        guard var reply = replies[id] else { return }
        reply.printed += Array(piece.utf8)
        if reply.markdown != nil {
            // Laid out at the next flush, with whatever else has come by then.
            reply.markdown?.append(piece)
            reply.pending = true
            replies[id] = reply
        } else {
            let text = reply.wrapper.feed(SafeText.sanitized(piece))
            replies[id] = reply
            emit(text)
        }
    }

    /// Makes `id` the reply whose line is open: a header, or a "continued" one.
    private func open(_ id: String) {
        guard current != id, var reply = replies[id] else { return }
        breakLine()
        let head = prefix(reply.created, Role.assistant.rawValue + (reply.headerShown ? " (continued)" : ""), .assistant)
        reply.headerShown = true
        reply.wrapper = Wrapper(width: width, column: head.width)
        if reply.markdown != nil {
            // Only what is not on the screen yet follows the header.
            reply.markdown?.settle(firstColumn: head.width)
            reply.pending = true
        }
        replies[id] = reply
        emit(head.text)
        live = LiveRows(startColumn: head.width)
        current = id
    }

    /// A stored reply goes on (`message.continued`): its text is on the screen already, so
    /// what streams now is appended under a "continued" header.
    func replyContinued(_ message: Message) {
        let id = message.id
        guard replies[id] == nil else { return }
        finished.remove(id)
        var reply = newReply(created: message.created)
        reply.printed = Array(message.content.utf8)
        reply.headerShown = true
        replies[id] = reply
        waitForText(id)
    }

    /// Who stopped reply `id`; said beside whichever message of its chain ends cancelled.
    func cancelled(id: String, by name: String) {
        cancelledBy[ToolLines.head(id) ?? id] = name
    }

    /// A reply is over: whatever of it we have not shown, its marker, and the end of its line.
    func replyEnded(_ message: Message, error: String?) {
        let id = message.id
        guard !finished.contains(id) else { return }
        stopWaiting(id)
        guard let reply = replies[id] else {
            // Never saw it start: print it whole.
            self.message(message, error: error)
            return
        }
        let content = Array(message.content.utf8)
        var rest: [UInt8] = []
        if content.count > reply.printed.count, content.starts(with: reply.printed) {
            rest = Array(content[reply.printed.count...])
        }
        let mark = marker(message, error: error)
        // A turn that said nothing and asked for tools shows only its calls.
        let silent = content.isEmpty && reply.printed.isEmpty && mark == nil && message.continuesAfterTools
        if !silent, current == id || !rest.isEmpty || mark != nil || !reply.headerShown {
            open(id)
            if var open = replies[id] {
                let restText = String(decoding: rest, as: UTF8.self)
                if var markdown = open.markdown {
                    markdown.width = width
                    markdown.append(restText)
                    emitLive(live.replace(committing: markdown.finish(), live: []))
                    open.markdown = markdown
                    emit(mark, after: live.column)
                } else {
                    emit(open.wrapper.feed(SafeText.sanitized(restText)) + open.wrapper.flush())
                    emit(mark, after: open.wrapper.column)
                }
                open.pending = false
                replies[id] = open
            }
        }
        replies[id] = nil
        finished.insert(id)
        if current == id {
            if !atLineStart { emit("\n") }
            current = nil
            live = LiveRows()
        }
        toolCalls(of: message)
        releaseHeld()
    }

    // MARK: Tools

    private func toolKey(_ call: String) -> String { "tool " + call }

    /// One of our `⚙` lines (made safe by `ToolCallFormat`) on a line of its own.
    private func toolLine(_ text: String, _ tone: Tone) {
        breakLine()
        emit(styled(text, tone) + "\n")
    }

    /// `⚙ weather {"city":"Paris"}` for each call a complete turn asked for: they run next.
    private func toolCalls(of message: Message) {
        guard message.continuesAfterTools else { return }
        for call in ToolLines.calls(of: message) {
            toolLine(ToolCallFormat.call(name: call.name, arguments: call.arguments, width: width), .quiet)
        }
    }

    /// A call waits for somebody's yes: the question, and the status row says so.
    func toolApprovalRequested(call: String, name: String, arguments: String, how: String) {
        toolLine(ToolCallFormat.approvalRequest(name: name, arguments: arguments, how: how, width: width), .title)
        waiting[toolKey(call)] = Spinner("waiting for approval of " + name)
        redrawStatus()
    }

    /// A call in a conversation shared with us waits for its owner's yes: nothing to answer here.
    func toolAwaitingOwner(call: String, name: String, arguments: String) {
        toolLine(ToolCallFormat.awaitingOwner(name: name, arguments: arguments, width: width), .title)
        waiting[toolKey(call)] = Spinner("waiting for the owner to approve " + name)
        redrawStatus()
    }

    /// Somebody answered: the call waits no more (it starts, or ends denied).
    func toolAnswered(call: String) {
        stopWaiting(toolKey(call))
    }

    /// A call began: the status row says which tool runs until it ends.
    func toolStarted(call: String, name: String) {
        waiting[toolKey(call)] = Spinner("running tool " + name)
        redrawStatus()
    }

    /// A running call reported how far it is: the status row says so (`running tool
    /// time__slow: 3/10 counting`), its words made one harmless line and cut short.
    func toolProgress(_ progress: ToolProgress) {
        let key = toolKey(progress.call)
        guard waiting[key] != nil else { return }
        let line = SafeText.singleLine(progress.tool + ": " + progress.summary)
        waiting[key] = Spinner("running tool " + (line.count > 80 ? String(line.prefix(79)) + "…" : line))
        redrawStatus()
    }

    /// A call already running when we attached (`… running`).
    func toolInFlight(_ message: Message) {
        guard let call = message.tool?.callID else { return }
        toolLine(ToolLines.result(message, width: width), .quiet)
        toolStarted(call: call, name: ToolLines.name(of: message))
    }

    /// A call ended: how it went, under its call.
    func toolCompleted(_ message: Message) {
        if let call = message.tool?.callID { stopWaiting(toolKey(call)) }
        guard !finished.contains(message.id) else { return }
        self.message(message)
    }

    /// A call's arguments whole, nothing shortened, each row cut at the width rather than
    /// between words, so that every character (a run of spaces too) keeps its place.
    func fullArguments(_ arguments: String) {
        notice("arguments in full:")
        let text = ToolCallFormat.fullArguments(arguments)
        var rows: [String] = []
        var row = ""
        var used = 0
        for character in text {
            let characterWidth = DisplayWidth.of(character)
            if used + characterWidth > max(2, width), !row.isEmpty {
                rows.append(row)
                row = ""
                used = 0
            }
            row.append(character)
            used += characterWidth
        }
        rows.append(row)
        emit(styled(rows.joined(separator: "\n"), .quiet) + "\n")
    }

    /// `/tool`: which call a tool message answers, how it went, and everything the tool
    /// answered, wrapped as people's messages are (it is another party's text, made safe).
    func toolDetail(_ message: Message, arguments: String?) {
        let id = message.id
        let call = message.tool?.callID ?? "?"
        let summary = ToolCallFormat.summary(name: ToolLines.name(of: message), arguments: arguments ?? "",
                                             outcome: ToolLines.outcome(of: message), width: Int.max / 2)
        notice("\(id) · call \(call) · \(summary)")
        if let arguments, !arguments.isEmpty { fullArguments(arguments) }
        var wrapper = Wrapper(width: width)
        emit(wrapper.feed(SafeText.sanitized(message.content)) + wrapper.flush())
        if !atLineStart { emit("\n") }
        if message.tool?.truncated == true { notice("the tool's answer was longer: this is its start") }
    }
}
