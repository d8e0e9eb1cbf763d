#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Posix
import Terminal

/// The reply one `confab ask` waits for, shown as `ReplyFollower` reports it, and the ways it
/// stops: Ctrl-C cancels it (exit 130); a reader that goes away (`| head`) cancels it when
/// nobody else watches the conversation, and otherwise leaves it to them, as a closed
/// terminal does (SIGHUP kills us, the reply goes on in the daemon). When confabd goes away
/// (a restart, an upgrade), we wait for it to come back, catch up with what was stored
/// meanwhile and go on following.
///
/// Every turn's text goes to standard output, each ending on a line break before the next
/// begins; each tool call goes to standard error as one line once it ends. A call that
/// needs a yes is asked about on the terminal (standard input and error, else `/dev/tty`),
/// and denied when there is none.
final class AskStream {
    /// Exit status of a reply the model's token limit cut off (`confab continue` goes on with it).
    static let cutAtLengthLimitStatus: Int32 = 4
    /// Exit status when the owner stopped sharing the conversation mid-reply: the reply may
    /// go on for the owner, but this user sees no more of it.
    static let unsharedStatus: Int32 = 5

    private var connection: Connection
    private let socketPath: String
    private let conversation: String
    private let reply: String
    private var follower: ReplyFollower
    /// Calls waiting for our yes or no, oldest first; the first is being asked.
    private var questions: [ToolCall] = []
    /// The terminal the question is on, while one is asked.
    private var asking: Question?
    /// Where questions are asked, once looked for: nil inside when there is no terminal.
    private var questionTerminal: QuestionTerminal??
    /// Ctrl-C came while a question was on the terminal: its line is ended already.
    private var afterQuestion = false
    /// Our `tool.approve` requests, by request id: the call each answers.
    private var approvals: [Int: ToolCall] = [:]
    private var cancelRequest: Int?
    private let stderrIsTerminal = isatty(2) != 0
    private let stderrColour = isatty(2) != 0 && (Environment.get("NO_COLOR") ?? "").isEmpty

    /// A terminal to ask on: read from `input`, write to `output`.
    private struct QuestionTerminal {
        var input: Int32
        var output: Int32
    }

    private struct Question {
        var call: ToolCall
        var line: [UInt8] = []
    }
    /// Print the final message object instead of the text.
    private let json: Bool
    private let toTerminal = isatty(1) != 0
    private let status = StatusLine(fd: 2)
    /// Other clients attached to the conversation, by id: people who would see the reply.
    private var others: Set<String>
    /// The conversation is ours: its calls wait for our yes (another user's wait for the owner's).
    private let approvesCalls: Bool
    /// What of the reply went to standard output, byte for byte.
    private var written: [UInt8] = []
    private var outputOpen = true
    private var cancelling: Cancelling?
    private var sawText = false
    /// The reply's markdown laid out, on a terminal unless --raw.
    private var markdown: MarkdownStream?
    private var live = LiveRows()
    /// Text arrived that is not laid out yet.
    private var renderPending = false
    private var renderedAnything = false
    /// confabd said it is stopping: the connection's end that follows is expected.
    private var daemonStopping: String?

    private enum Cancelling {
        case interrupted, outputClosed
    }

    /// `--reasoning`: the thought goes to standard error as it comes.
    private let writesReasoning: Bool
    /// What of the thought went to standard error, and whether its line is open.
    private var reasoningOpen = false

    init(connection: Connection, socketPath: String, conversation: String, reply: String, json: Bool, render: Bool,
         attached: AttachResult, reasoning: Bool = false) {
        writesReasoning = reasoning
        self.connection = connection
        self.socketPath = socketPath
        self.conversation = conversation
        self.reply = reply
        follower = ReplyFollower(conversation: conversation, reply: reply)
        self.json = json
        self.others = Set(attached.clients.map(\.id))
        approvesCalls = attached.conversation?.roleOfThisUser == nil
        if render && !json, let size = TerminalSize.of(1) {
            let renderer = MarkdownRenderer(colour: (Environment.get("NO_COLOR") ?? "").isEmpty)
            markdown = MarkdownStream(renderer: renderer, width: size.columns, maxLiveRows: size.rows - 2)
            markdown?.holdsPartialWords = true
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
            var fds = [BlockingPoll.Watch(fd: connection.fd), BlockingPoll.Watch(fd: signals)]
            // A pipe's writing end reports POLLERR once its reader is gone: `| head` has
            // had enough, even while no text is due.
            let watchOutput = outputOpen && !toTerminal
            let outputIndex = fds.count
            if watchOutput { fds.append(BlockingPoll.Watch(fd: 1, readable: false)) }
            let questionIndex = fds.count
            let questionInput = asking != nil ? questionTerminal??.input : nil
            if let questionInput { fds.append(BlockingPoll.Watch(fd: questionInput)) }
            do {
                guard try BlockingPoll.wait(&fds, timeoutMilliseconds: status.nextTickMilliseconds) else { continue }
            } catch {
                throw .message("poll failed: \(error)")
            }
            status.tick()
            if fds[1].ready {
                let caught = SignalPipe.drain()
                if caught.contains(SIGWINCH) { resized() }
                if caught.contains(SIGINT), let exit = try interrupted() { return exit }
            }
            if watchOutput, fds[outputIndex].ready {
                if let exit = try outputClosed() { return exit }
            }
            if questionInput != nil, fds[questionIndex].ready {
                try readAnswer()
            }
            if fds[0].ready {
                if !(try connection.receive()) {
                    // What was read before the end is handled first: the reply may have ended.
                    while let event = connection.nextEvent() {
                        if let exit = try handle(event) { return exit }
                    }
                    if let exit = try reconnect(signals: signals) { return exit }
                }
            }
        }
    }

    // MARK: Reconnecting

    /// confabd went away before the reply ended (a restart, an upgrade, a crash): it is said,
    /// and we wait for it to be back, then catch up with what it stored meanwhile. Ctrl-C
    /// leaves (the reply, if it runs, goes on in confabd); nil once we follow again.
    private func reconnect(signals: Int32) throws(Failure) -> Int32? {
        dropQuestion(saying: nil)
        questions = []
        approvals = [:]
        status.clear()
        endLine()
        // A cancel we had sent may not have arrived: a leaving reader's ends us at once.
        if cancelling == .outputClosed { return diedOfSIGPIPE() }
        let why = daemonStopping.map { "confabd stopped (\($0))" } ?? "confabd closed the connection"
        Out.error("\(why) before the reply finished; waiting for it to come back (Ctrl-C leaves)")
        daemonStopping = nil
        var waitMilliseconds: Int32 = 100
        while true {
            status.spin("waiting for confabd")
            var fds = [BlockingPoll.Watch(fd: signals)]
            if (try? BlockingPoll.wait(&fds, timeoutMilliseconds: waitMilliseconds)) == true, fds[0].ready {
                let caught = SignalPipe.drain()
                if caught.contains(SIGWINCH) { resized() }
                if caught.contains(SIGINT) {
                    status.clear()
                    if isatty(2) != 0 { Out.errorLine("") }
                    return 130
                }
            }
            status.tick()
            waitMilliseconds = min(1000, waitMilliseconds * 2)
            let fresh: Connection
            do {
                fresh = try Connection.start(socketPath, command: "ask")
            } catch {
                if case .unreachable = error { continue }
                if case .disconnected = error { continue }
                status.clear()
                throw error
            }
            let attached: AttachResult
            do {
                // As many messages as a reply with many tool rounds can have made meanwhile.
                attached = try fresh.call(AttachCall.self, AttachParams(conversation: conversation, history: 200, quiet: true))
            } catch {
                // Still starting, or stopping again: try again.
                if case .disconnected = error { continue }
                status.clear()
                throw error
            }
            connection = fresh
            others = Set(attached.clients.map(\.id))
            status.clear()
            Out.error("confabd is back; following the reply again")
            if cancelling != nil { cancelRequest = try connection.send(CancelCall.self, CancelParams(conversation: conversation, message: reply)) }
            status.spin("waiting for the model")
            for progress in follower.resume(stored: attached.messages, pending: attached.pending, tools: attached.tools) {
                if let exit = try show(progress) { return exit }
            }
            return nil
        }
    }

    // MARK: Stopping

    /// Ctrl-C: stop our reply, then leave with 130. A second Ctrl-C leaves at once.
    private func interrupted() throws(Failure) -> Int32? {
        if cancelling == .interrupted { return leaveInterrupted() }
        cancelling = .interrupted
        // The ^C the terminal echoed after a question is followed by a line break already.
        if asking != nil { afterQuestion = true }
        dropQuestion(saying: nil)
        // Over rendered rows a status line would wipe one that is not drawn again.
        if markdown == nil || !sawText { status.spin("cancelling") }
        // Any id of the reply's chain stops the whole chain, and nothing else.
        cancelRequest = try connection.send(CancelCall.self, CancelParams(conversation: conversation, message: reply))
        return nil
    }

    private func leaveInterrupted() -> Int32 {
        dropQuestion(saying: nil)
        status.clear()
        endLine()
        // The terminal echoed ^C after our text; the shell's prompt goes on a line of its own.
        if isatty(2) != 0, !afterQuestion { Out.errorLine("") }
        return 130
    }

    /// Our reader went away. Nobody else watching: stop the reply nobody will read. Others
    /// watching: it is theirs too, and goes on, as when our terminal closes.
    private func outputClosed() throws(Failure) -> Int32? {
        guard outputOpen else { return nil }
        outputOpen = false
        if others.isEmpty && cancelling == nil {
            cancelling = .outputClosed
            cancelRequest = try connection.send(CancelCall.self, CancelParams(conversation: conversation, message: reply))
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
        case .response(let id, let result):
            if let call = approvals.removeValue(forKey: id) {
                approvalAnswered(call, result)
                return nil
            }
            // The only other request we send is generation.cancel.
            guard let cancelling, id == cancelRequest else { return nil }
            if case .failure(let error) = result {
                status.clear()
                Out.error("could not cancel the reply: \(error.message)")
            }
            switch cancelling {
            case .interrupted:
                if case .success(let value) = result, CancelResult(json: value).cancelled == nil, !sawText {
                    status.clear()
                    Out.error("the reply had not started; it stays queued in confabd")
                }
                return leaveInterrupted()
            case .outputClosed:
                return diedOfSIGPIPE()
            }
        case .notification(let notification):
            switch notification {
            case .serverStopping(let reason):
                // Replies in flight were announced as interrupted before this, so ours has
                // not started (it is queued) and runs when confabd starts again.
                daemonStopping = reason ?? "no reason given"
            case .conversation(conversation, .clientAttached(let client)):
                others.insert(client.id)
            case .conversation(conversation, .clientDetached(let client)):
                others.remove(client.id)
            default:
                break
            }
            for progress in follower.take(notification) {
                if let exit = try show(progress) { return exit }
            }
            return nil
        }
    }

    /// Renders one step the follower reported; the exit status once the reply is over.
    private func show(_ progress: ReplyProgress) throws(Failure) -> Int32? {
        switch progress {
        case .turnStarted, .continued:
            // A continued reply's text so far is stored: the follower reports only what is added.
            break
        case .reasoning(_, let piece, let thought):
            if writesReasoning {
                status.clear()
                writeReasoning(piece)
            } else if cancelling == nil && asking == nil {
                status.think(thought)
            }
        case .reasoningEnded:
            endReasoning()
            if cancelling == nil && asking == nil { status.spin("waiting for the model") }
        case .text(_, let piece):
            sawText = true
            // The status line (waiting for the model, for the tools) gives way to the text.
            if cancelling == nil { status.clear() }
            if !json { return try write(Array(piece.utf8)) }
        case .retrying(let attempt, let delay, let error):
            // One short line: the server's own text is in the message's error and confabd's log.
            status.countdown("\(Words.replyError(error, detailed: false)); retry \(attempt) in", milliseconds: delay)
        case .cancelled:
            break
        case .turnEnded:
            status.clear()
            finishTurn()
        case .toolsRequested:
            // The reply goes on after its calls, whose lines come as each ends.
            if cancelling == nil && asking == nil { status.spin("running tools") }
        case .approvalRequested(let call) where !approvesCalls:
            // Only the owner may answer: nothing to ask here, only what the reply waits for.
            status.clear()
            Out.error("call \(SafeText.singleLine(call.name)) waits for the owner's approval")
            if cancelling == nil { status.spin("waiting for the owner") }
        case .approvalRequested(let call):
            if !questions.contains(where: { $0.id == call.id }) { questions.append(call) }
            try askNext()
        case .approvalDecided(let call, let allowed, let by):
            // Somebody else answered first (ours is taken out of the questions when sent).
            guard questions.contains(where: { $0.id == call.id }) else { return nil }
            let said = "call \(call.name) \((allowed ? ToolApprovalState.approved : .denied).rawValue)" + (by.map { " by \(Words.clientName($0))" } ?? ": nobody answered in time")
            if asking?.call.id == call.id { dropQuestion(saying: said) } else { Out.error(said) }
            questions.removeAll { $0.id == call.id }
            try askNext()
        case .toolStarted:
            if asking == nil && cancelling == nil { status.spin(runningStatus) }
        case .toolEnded(let message, let call):
            toolEnded(message, call: call)
        case .finished(let end):
            status.clear()
            finishTurn()
            return try finished(end)
        }
        return nil
    }

    /// `--reasoning`: a piece of the thought on standard error, byte for byte into a pipe or a
    /// file, made safe on a terminal (dim unless NO_COLOR).
    private func writeReasoning(_ piece: String) {
        guard !piece.isEmpty else { return }
        reasoningOpen = !piece.hasSuffix("\n")
        if stderrIsTerminal {
            var text = SafeText.sanitized(piece)
            if stderrColour { text = "\u{1B}[2m" + text + "\u{1B}[0m" }
            _ = text.withUTF8 { Out.writeAll(2, UnsafeRawBufferPointer($0)) }
        } else {
            var text = piece
            _ = text.withUTF8 { Out.writeAll(2, UnsafeRawBufferPointer($0)) }
        }
    }

    /// The thought written with --reasoning ends on a line of its own, before the answer.
    private func endReasoning() {
        guard reasoningOpen else { return }
        reasoningOpen = false
        writeError("")
    }

    /// The reply is over: its exit status, or the failure to report.
    private func finished(_ end: ReplyEnd) throws(Failure) -> Int32 {
        endReasoning()
        if json, let message = end.message { Out.json(message.json) }
        if cancelling == .interrupted { return leaveInterrupted() }
        if cancelling == .outputClosed { return diedOfSIGPIPE() }
        switch end.outcome {
        case .complete:
            return 0
        case .cutAtLengthLimit:
            Out.error("the reply was cut off at the model's length limit; confab continue \(conversation) goes on with it")
            return Self.cutAtLengthLimitStatus
        case .cancelled(let by):
            throw .message("the reply was cancelled" + (by.map { " by \(Words.clientName($0))" } ?? ""))
        case .failed(let error) where error?.code == .thinkingExhausted:
            // Like a reply cut at the length limit, but with nothing to continue: the daemon's
            // message says what to raise.
            Out.error(Words.replyError(error))
            return Self.cutAtLengthLimitStatus
        case .failed(let error):
            throw .message("the reply failed: " + Words.replyError(error))
        case .interrupted:
            throw .message("the reply was interrupted: confabd stopped before it finished (what came is kept; confab retry \(conversation) asks again)")
        case .conversationDeleted:
            throw .message("the conversation was deleted")
        case .unshared(let by):
            Out.error("the reply was cut off: \(Words.unshared(by: by)); it may go on without you")
            return Self.unsharedStatus
        }
    }

    /// A turn ended: its layout finished, then a newline unless there is one.
    private func finishTurn() {
        guard !json else { return }
        if var markdown {
            writeRendered(live.replace(committing: markdown.finish(), live: []))
            self.markdown = markdown
            renderPending = false
        }
        endLine()
        // A turn after tool calls starts on a row of its own.
        live = LiveRows()
    }

    // MARK: Tools

    /// `running tool weather`, `running tools weather, echo`.
    private var runningStatus: String {
        let names = follower.running.map(\.name)
        if names.isEmpty { return "running tools" }
        return (names.count == 1 ? "running tool " : "running tools ") + names.joined(separator: ", ")
    }

    /// Lines for standard error that wait while a question is on the terminal.
    private var deferredLines: [String] = []

    /// A call ended: one line on standard error (`⚙ weather {"city":"Paris"} → 200 · 84 ms`).
    private func toolEnded(_ message: Message, call: ToolCall) {
        if asking?.call.id == call.id { dropQuestion(saying: nil) }
        questions.removeAll { $0.id == call.id }
        let outcome = ToolLines.outcome(of: message)
        let width = stderrIsTerminal ? (TerminalSize.of(2)?.columns ?? 80) : Int.max / 2
        let line = ToolCallFormat.summary(name: call.name, arguments: call.arguments, outcome: outcome, width: width)
        let styled = stderrColour ? "\u{1B}[\(outcome.isFailure ? "31" : "2")m" + line + "\u{1B}[0m" : line
        if asking != nil {
            deferredLines.append(styled)
            return
        }
        status.clear()
        writeError(styled)
        if cancelling == nil { status.spin(follower.running.isEmpty ? "waiting for the model" : runningStatus) }
    }
    /// A line of ours (made safe already) on standard error.
    private func writeError(_ line: String) {
        var text = line + "\n"
        _ = text.withUTF8 { Out.writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// Asks about the oldest call waiting for a yes, unless a question is on already; with
    /// no terminal to ask on, each is denied, and that is said.
    private func askNext() throws(Failure) {
        while asking == nil, cancelling == nil, let call = questions.first {
            status.clear()
            guard let terminal = openQuestionTerminal() else {
                questions.removeFirst()
                Out.error("denied tool call \(SafeText.singleLine(call.name)): no terminal to ask on")
                try sendApproval(call, allow: false)
                continue
            }
            asking = Question(call: call)
            let width = TerminalSize.of(terminal.output)?.columns ?? 80
            var text = ToolCallFormat.question(name: call.name, arguments: call.arguments, width: width)
            _ = text.withUTF8 { Out.writeAll(terminal.output, UnsafeRawBufferPointer($0)) }
        }
    }

    /// Standard input and error when both are a terminal, else the controlling terminal
    /// (`git diff | confab ask …` reads its prompt from a pipe); nil when there is none.
    private func openQuestionTerminal() -> QuestionTerminal? {
        if let known = questionTerminal { return known }
        var found: QuestionTerminal?
        if isatty(0) != 0 && isatty(2) != 0 {
            found = QuestionTerminal(input: 0, output: 2)
        } else {
            if let fd = try? Files.open("/dev/tty", O_RDWR | O_NOCTTY) { found = QuestionTerminal(input: fd, output: fd) }
        }
        questionTerminal = .some(found)
        return found
    }

    /// The terminal has input for the question: once a whole line is in, `y` or `yes` allows
    /// the call and anything else denies it (end of input too).
    private func readAnswer() throws(Failure) {
        guard var question = asking, let terminal = questionTerminal ?? nil else { return }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count: Int
        do {
            count = try buffer.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Files.read(terminal.input, into: raw) }
        } catch let error as Errno where error.code == EAGAIN {
            return
        } catch {
            count = -1
        }
        if count > 0 {
            question.line += buffer[0..<count]
            guard let newline = question.line.firstIndex(of: 0x0A) else {
                asking = question
                return
            }
            question.line.removeSubrange(newline...)
        } else {
            // End of input, or the terminal is gone: no yes. The cursor is after the question.
            var text = "\n"
            _ = text.withUTF8 { Out.writeAll(terminal.output, UnsafeRawBufferPointer($0)) }
        }
        asking = nil
        let answer = String(decoding: question.line, as: UTF8.self).trimmingWhitespace.lowercased()
        questions.removeAll { $0.id == question.call.id }
        try sendApproval(question.call, allow: answer == "y" || answer == "yes")
        flushDeferred()
        try askNext()
    }

    /// Takes the question off the terminal (another client answered it, the call ended, or
    /// we are leaving), saying why when there is something to say.
    private func dropQuestion(saying text: String?) {
        guard let question = asking, let terminal = questionTerminal ?? nil else { return }
        asking = nil
        questions.removeAll { $0.id == question.call.id }
        // What was typed for it is not an answer to anything else.
        TerminalDevice.discardTypedInput(terminal.input)
        var out = "\n" + (text.map { "confab: " + SafeText.singleLine($0) + "\n" } ?? "")
        _ = out.withUTF8 { Out.writeAll(terminal.output, UnsafeRawBufferPointer($0)) }
        flushDeferred()
    }

    private func flushDeferred() {
        for line in deferredLines { writeError(line) }
        deferredLines = []
    }

    private func sendApproval(_ call: ToolCall, allow: Bool) throws(Failure) {
        let id = try connection.send(ApproveCall.self, ApproveParams(conversation: conversation, call: call.id, allow: allow))
        approvals[id] = call
    }

    /// A refused answer (-32006: somebody answered first, or the call ended) settles nothing
    /// new: it is said, and the reply goes on.
    private func approvalAnswered(_ call: ToolCall, _ result: Result<JSON, RPCError>) {
        guard case .failure(let error) = result else { return }
        status.clear()
        // The message names the call by its id, which the model server chose: made safe like any of its text.
        Out.error("call \(SafeText.singleLine(call.name)): \(SafeText.singleLine(error.message))")
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

    /// The window changed size: the rows printed stay as the terminal reflows them, and the
    /// reply goes on below them at the new width, with only what it had not shown yet.
    private func resized() {
        guard var markdown, let size = TerminalSize.of(1) else { return }
        if !live.isEmpty || live.column != 0 { writeRendered("\n") }
        live = LiveRows()
        markdown.width = size.columns
        markdown.maxLiveRows = max(1, size.rows - 2)
        markdown.settle(firstColumn: 0)
        self.markdown = markdown
        renderPending = true
    }

    /// Writes reply text: byte for byte into a pipe or file, made safe on a terminal, laid
    /// out when rendering.
    private func write(_ bytes: [UInt8]) throws(Failure) -> Int32? {
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
    /// While the model thinks: since when, and its thought so far (the newest line is shown).
    private(set) var thought: Reasoning?

    init(_ text: String, countdownMilliseconds: Int? = nil, then afterCountdown: String? = nil, detail: String? = nil) {
        self.text = text
        deadline = countdownMilliseconds.map { Self.now() + Int64($0) }
        self.afterCountdown = afterCountdown
        self.detail = detail
    }

    /// `thinking… 12 s · the newest line of thought`, the seconds counted from `thought.started`.
    init(thinking thought: Reasoning) {
        text = "thinking…"
        self.thought = thought
    }

    mutating func advance() { frame += 1 }

    /// The status's line, before it is cut to the terminal's width.
    var line: String {
        if let thought {
            return ThoughtText.status(seconds: thought.seconds(now: Timestamp.now()), thought: thought.text, width: Int.max / 2)
        }
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

    /// The thinking row is dim, unless NO_COLOR.
    private let colour: Bool

    init(fd: Int32) {
        self.fd = fd
        isTerminal = isatty(fd) != 0
        colour = (Environment.get("NO_COLOR") ?? "").isEmpty
    }

    /// How long poll may sleep before the line wants redrawing; -1 when it does not.
    var nextTickMilliseconds: Int32 { spinner == nil || !isTerminal ? -1 : 100 }

    func spin(_ text: String) {
        spinner = Spinner(text)
        draw()
    }

    /// The folded thought of a reply that thinks: redrawn as pieces come and each second.
    func think(_ thought: Reasoning) {
        spinner = Spinner(thinking: thought)
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
        var line = TextRows.firstRow(SafeText.singleLine(spinner.line), width: columns - 1)
        if spinner.thought != nil, colour { line = "\u{1B}[2m" + line + "\u{1B}[0m" }
        write("\r\u{1B}[K" + line)
        shown = true
    }

    private func write(_ text: String) {
        var text = text
        _ = text.withUTF8 { Out.writeAll(fd, UnsafeRawBufferPointer($0)) }
    }
}
