#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Posix
import Terminal

/// The reply one `confab ask` waits for, shown as it streams, and the ways it stops:
/// Ctrl-C cancels it (exit 130); a reader that goes away (`| head`) cancels it unless
/// somebody else is watching the conversation; a closed terminal (SIGHUP, which kills us
/// by default) or a lost connection leaves it running in the daemon.
final class AskStream {
    private let connection: Connection
    private let conversation: String
    private let reply: String
    /// Print the final message object instead of the text.
    private let json: Bool
    private let toTerminal = isatty(1) != 0
    private let status = StatusLine(fd: 2)
    /// Other clients attached to the conversation, by id: people who would see the reply.
    private var others: Set<String>
    /// What of the reply went to standard output, byte for byte.
    private var written: [UInt8] = []
    /// The reply's text from before we followed it (a continued reply's), not ours to print.
    private var before = 0
    private var outputOpen = true
    private var cancelling: Cancelling?
    private var cancelledBy: String?
    private var sawText = false
    /// The reply's markdown laid out, on a terminal unless --raw.
    private var markdown: MarkdownStream?
    private var live = LiveRows()
    /// Text arrived that is not laid out yet.
    private var renderPending = false
    private var renderedAnything = false

    private enum Cancelling {
        case interrupted, outputClosed
    }

    init(connection: Connection, conversation: String, reply: String, json: Bool, render: Bool, others: [JSON]) {
        self.connection = connection
        self.conversation = conversation
        self.reply = reply
        self.json = json
        self.others = Set(others.compactMap { $0["id"]?.string })
        if render && !json, let size = TerminalSize.of(1) {
            let renderer = MarkdownRenderer(colour: (Environment.get("NO_COLOR") ?? "").isEmpty)
            markdown = MarkdownStream(renderer: renderer, width: size.columns, maxLiveRows: size.rows - 2)
        }
    }

    /// Runs until the reply ends or we stop it; the exit status.
    func run() throws(Failure) -> Int32 {
        let signals: Int32
        do {
            signals = try SignalPipe.install(markdown != nil ? [SIGINT, SIGWINCH] : [SIGINT])
        } catch {
            throw .message("cannot catch signals: \(error)")
        }
        status.spin("waiting for the model")
        while true {
            while let event = connection.nextEvent() {
                if let exit = try handle(event) { return exit }
            }
            drawPendingText()
            var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: signals, events: Int16(POLLIN), revents: 0)]
            // A pipe's writing end reports POLLERR once its reader is gone: `| head` has
            // had enough, even while no text is due.
            let watchOutput = outputOpen && !toTerminal
            if watchOutput { fds.append(pollfd(fd: 1, events: 0, revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), status.nextTickMilliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                throw .message("poll failed: \(errorText(errno))")
            }
            status.tick()
            if fds[1].revents != 0 {
                let caught = SignalPipe.drain()
                if caught.contains(SIGWINCH) { resized() }
                if caught.contains(SIGINT), let exit = try interrupted() { return exit }
            }
            if watchOutput, fds[2].revents & Int16(POLLERR | POLLHUP) != 0 {
                if let exit = try outputClosed() { return exit }
            }
            if fds[0].revents != 0 {
                guard try connection.receive() else {
                    status.clear()
                    endLine()
                    throw .message("confabd closed the connection before the reply finished (it goes on if confabd does)")
                }
            }
        }
    }

    // MARK: Stopping

    /// Ctrl-C: stop our reply, then leave with 130. A second Ctrl-C leaves at once.
    private func interrupted() throws(Failure) -> Int32? {
        if cancelling == .interrupted { return leaveInterrupted() }
        cancelling = .interrupted
        // Over rendered rows a status line would wipe one that is not drawn again.
        if markdown == nil || !sawText { status.spin("cancelling") }
        try connection.send("generation.cancel", ["conversation": .string(conversation), "message": .string(reply)])
        return nil
    }

    private func leaveInterrupted() -> Int32 {
        status.clear()
        endLine()
        // The terminal echoed ^C after our text; the shell's prompt goes on a line of its own.
        if isatty(2) != 0 { Out.errorLine("") }
        return 130
    }

    /// Our reader went away. Nobody else watching: stop the reply nobody will read.
    private func outputClosed() throws(Failure) -> Int32? {
        guard outputOpen else { return nil }
        outputOpen = false
        if others.isEmpty && cancelling == nil {
            cancelling = .outputClosed
            try connection.send("generation.cancel", ["conversation": .string(conversation), "message": .string(reply)])
            return nil
        }
        return diedOfSIGPIPE()
    }

    /// Ends the way a filter whose reader left ends: by SIGPIPE.
    private func diedOfSIGPIPE() -> Int32 {
        status.clear()
        signal(SIGPIPE, SIG_DFL)
        raise(SIGPIPE)
        return 141
    }

    // MARK: Events

    private func handle(_ event: Event) throws(Failure) -> Int32? {
        switch event {
        case .fatal(let error):
            status.clear()
            throw .rpc(error)
        case .response(_, let result):
            // The only request in flight is our generation.cancel.
            guard let cancelling else { return nil }
            if case .failure(let error) = result {
                status.clear()
                Out.error("could not cancel the reply: \(error.message)")
            }
            switch cancelling {
            case .interrupted:
                if case .success(let value) = result, value["cancelled"]?.string == nil, !sawText {
                    status.clear()
                    Out.error("the reply had not started; it stays queued in confabd")
                }
                return leaveInterrupted()
            case .outputClosed:
                return diedOfSIGPIPE()
            }
        case .notification(let method, let params):
            return try notification(method, params)
        }
    }

    private func notification(_ method: String, _ params: JSON) throws(Failure) -> Int32? {
        if method == "server.stopping" {
            // Replies in flight are announced as interrupted before this, so ours has not
            // started (it was queued) and will run when confabd starts again.
            status.clear()
            endLine()
            let reason = params["reason"]?.string.map { " (\($0))" } ?? ""
            throw .message("confabd is stopping\(reason) before the reply finished")
        }
        guard params["conversation"]?.string == conversation else { return nil }
        switch method {
        case "message.continued":
            guard let message = params["message"], message["id"]?.string == reply else { return nil }
            before = (message["content"]?.string ?? "").utf8.count
        case "message.delta":
            guard params["message"]?.string == reply, let piece = params["content"]?.string, !piece.isEmpty else { return nil }
            if !sawText {
                sawText = true
                if cancelling == nil { status.clear() }
            }
            if !json { return try show(Array(piece.utf8)) }
        case "message.retrying":
            guard params["message"]?.string == reply else { return nil }
            let attempt = params["attempt"]?.int ?? 1
            let delay = params["delay_ms"]?.int ?? 0
            status.countdown("\(Words.replyError(params["error"])); retry \(attempt) in", milliseconds: delay)
        case "generation.cancelled":
            guard params["message"]?.string == reply else { return nil }
            cancelledBy = Words.clientName(params["by"])
        case "message.completed", "message.failed":
            guard let message = params["message"], message["id"]?.string == reply else { return nil }
            status.clear()
            if let exit = try finish(message) { return exit }
            if json { Out.stdout(message.text + "\n") }
            if cancelling == .interrupted { return leaveInterrupted() }
            switch message["status"]?.string ?? "complete" {
            case "complete": return 0
            case "cancelled":
                throw .message("the reply was cancelled" + (cancelledBy.map { " by \($0)" } ?? ""))
            case "failed":
                throw .message("the reply failed: " + Words.replyError(params["error"] ?? message["error"]))
            case let other:
                throw .message("the reply ended \(other)")
            }
        case "client.attached":
            if let id = params["client"]?["id"]?.string { others.insert(id) }
        case "client.detached":
            if let id = params["client"]?["id"]?.string { others.remove(id) }
        case "conversation.deleted":
            status.clear()
            endLine()
            throw .message("the conversation was deleted")
        default:
            break
        }
        return nil
    }

    /// What the final message has beyond what we streamed (normally nothing: we attached
    /// before sending), then a newline unless there is one.
    private func finish(_ message: JSON) throws(Failure) -> Int32? {
        guard !json else { return nil }
        let content = Array((message["content"]?.string ?? "").utf8.dropFirst(before))
        if content.count > written.count, content.starts(with: written) {
            if let exit = try show(Array(content[written.count...])) { return exit }
        }
        if var markdown {
            writeRendered(live.replace(committing: markdown.finish(), live: []))
            self.markdown = markdown
            renderPending = false
        }
        endLine()
        return nil
    }

    // MARK: Rendering

    /// Lays out what has streamed in since the last call.
    private func drawPendingText() {
        guard renderPending, var markdown else { return }
        renderPending = false
        let update = markdown.update()
        self.markdown = markdown
        writeRendered(live.replace(committing: update.committed, live: update.live))
    }

    private func writeRendered(_ text: String) {
        guard !text.isEmpty else { return }
        renderedAnything = true
        var text = text
        _ = text.withUTF8 { Out.writeAll(1, UnsafeRawBufferPointer($0)) }
    }

    /// The window changed size: the rows printed stay as the terminal keeps them, and the
    /// block being written is laid out again below them at the new width.
    private func resized() {
        guard var markdown, let size = TerminalSize.of(1) else { return }
        if !live.isEmpty || live.column != 0 { writeRendered("\n") }
        live = LiveRows()
        markdown.width = size.columns
        markdown.maxLiveRows = max(1, size.rows - 2)
        markdown.restart(firstColumn: 0)
        self.markdown = markdown
        renderPending = true
    }

    /// Writes reply text: byte for byte into a pipe or file, made safe on a terminal, laid
    /// out when rendering.
    private func show(_ bytes: [UInt8]) throws(Failure) -> Int32? {
        guard outputOpen else { return nil }
        written += bytes
        if markdown != nil {
            markdown?.append(String(decoding: bytes, as: UTF8.self))
            renderPending = true
            return nil
        }
        let failure: Int32?
        if toTerminal {
            var text = SafeText.sanitized(String(decoding: bytes, as: UTF8.self))
            failure = text.withUTF8 { Out.writeAll(1, UnsafeRawBufferPointer($0)) }
        } else {
            failure = bytes.withUnsafeBytes { Out.writeAll(1, $0) }
        }
        guard let failure else { return nil }
        if failure == EPIPE { return try outputClosed() }
        throw .message("cannot write to standard output: \(errorText(failure))")
    }

    private func endLine() {
        if markdown != nil {
            // Rendered rows never end with a line break of their own.
            guard outputOpen, renderedAnything else { return }
            renderedAnything = false
            _ = [UInt8(0x0A)].withUnsafeBytes { Out.writeAll(1, $0) }
            return
        }
        guard outputOpen, !json, let last = written.last, last != 0x0A else { return }
        written.append(0x0A)
        _ = [UInt8(0x0A)].withUnsafeBytes { Out.writeAll(1, $0) }
    }
}

/// What a status shows while a reply has no text yet: a spinner and what we wait for, or
/// a countdown to the next retry (after which it waits again).
struct Spinner {
    private(set) var text: String
    private var deadline: Int64?
    private var frame = 0
    private static let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

    /// Shown once the countdown is over (the retry is under way).
    private var afterCountdown: String?
    /// After the countdown, where a narrow terminal cuts it rather than the seconds.
    private var detail: String?

    init(_ text: String, countdownMilliseconds: Int? = nil, then afterCountdown: String? = nil, detail: String? = nil) {
        self.text = text
        deadline = countdownMilliseconds.map { Self.now() + Int64($0) }
        self.afterCountdown = afterCountdown
        self.detail = detail
    }

    mutating func advance() { frame += 1 }

    /// The status's line, before it is cut to the terminal's width.
    var line: String {
        let spinner = Self.frames[frame % Self.frames.count] + " "
        guard let deadline else { return spinner + text }
        let left = deadline - Self.now()
        if left <= 0, let afterCountdown { return spinner + afterCountdown }
        return spinner + text + " " + Self.seconds(Int(max(0, left))) + (detail.map { ": " + $0 } ?? "")
    }

    static func seconds(_ milliseconds: Int) -> String { "\((milliseconds + 999) / 1000) s" }

    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}

/// One line of status on a terminal's standard error (a spinner, a countdown), redrawn in
/// place and erased before anything else is written; nothing at all when stderr is not a
/// terminal, except a retry, said once as a plain line.
final class StatusLine {
    private let fd: Int32
    private let isTerminal: Bool
    private var spinner: Spinner?
    private var shown = false

    init(fd: Int32) {
        self.fd = fd
        isTerminal = isatty(fd) != 0
    }

    /// How long poll may sleep before the line wants redrawing; -1 when it does not.
    var nextTickMilliseconds: Int32 { spinner == nil || !isTerminal ? -1 : 100 }

    func spin(_ text: String) {
        spinner = Spinner(text)
        draw()
    }

    func countdown(_ text: String, milliseconds: Int) {
        spinner = Spinner(text, countdownMilliseconds: milliseconds)
        if !isTerminal {
            Out.errorLine("confab: \(text) \(Spinner.seconds(milliseconds))")
            return
        }
        draw()
    }

    func tick() {
        guard spinner != nil, isTerminal else { return }
        spinner?.advance()
        draw()
    }

    func clear() {
        spinner = nil
        guard shown else { return }
        shown = false
        write("\r\u{1B}[K")
    }

    private func draw() {
        guard let spinner, isTerminal else { return }
        let columns = TerminalSize.of(fd)?.columns ?? 80
        let line = DisplayWidth.truncate(SafeText.singleLine(spinner.line), to: columns - 1)
        write("\r\u{1B}[K" + line)
        shown = true
    }

    private func write(_ text: String) {
        var text = text
        _ = text.withUTF8 { Out.writeAll(fd, UnsafeRawBufferPointer($0)) }
    }
}
