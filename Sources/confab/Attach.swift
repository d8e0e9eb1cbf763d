#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import LineEditor
import Posix
import Terminal

struct Attach: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Show a conversation live; every line typed is sent to it.",
        discussion: """
            Lines starting with / are commands (/help lists them); // sends a line that starts \
            with a slash. Ctrl-C stops a reply in flight (you stay attached) or clears the line \
            being typed; Ctrl-D (end of input) detaches. Your name is --name, else $CONFAB_NAME, \
            else login@tty. Alt-Enter puts a line break in the message. Replies are rendered \
            from markdown on a terminal; --raw (or --plain) shows their text as it is, and \
            NO_COLOR keeps the layout without colours.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Option(help: "How many earlier messages to show (0 to 1000).") var history = 20
    @Option(help: "Your display name (default: $CONFAB_NAME, else login@tty).") var name: String?
    @Flag(name: [.customLong("raw"), .customLong("plain")],
          help: "Show replies as they are written (no markdown rendering) and without colours.")
    var plain = false

    func validate() throws {
        if !(0...1000).contains(history) { throw ValidationError("--history must be between 0 and 1000") }
    }

    func run() throws {
        let connection = try Connection.open(path: socketPath)
        let me = try connection.hello(command: "attach", name: name)
        let conversation = try connection.resolveConversation(id)
        let colour = !plain && isatty(1) != 0 && (Environment.get("NO_COLOR") ?? "").isEmpty
        let session = AttachSession(connection: connection, me: me, colour: colour, render: !plain && isatty(1) != 0)
        // A person at a terminal gets the chat screen and the line editor; a pipe or a
        // file gets plain lines both ways.
        let interactive = isatty(0) != 0 && isatty(1) != 0
        if interactive { session.startScreen() }
        defer { session.restoreTerminal() }
        try session.attach(conversation, history: history)
        if interactive { session.startEditor() }
        try session.run()
    }
}

/// The live part of `confab attach`: one poll loop over the socket, standard input and
/// the signals we act on (Ctrl-C, a resized window).
final class AttachSession {
    private let connection: Connection
    private var conversation = ""
    private let transcript: Transcript
    private let myClientID: String
    private let myName: String
    /// Others attached, by client id.
    private var present: [String: JSON] = [:]
    /// The oldest message shown, for /history.
    private var oldestShown: String?
    private var moreHistory = true
    /// Requests sent and not yet answered: id → what to do with the answer.
    private var outstanding: [Int: Pending] = [:]
    private var input: [UInt8] = []
    private var inputOpen = true
    private let interactive = isatty(0) != 0
    private let signals: Int32?
    private var screen: ChatScreen?
    private var editor: LineEditor?
    private var title = ""
    /// The model and system prompt as last announced, to say which of them a `conversation.updated` changed.
    private var model: String?
    private var system: String?
    private var profile: String?
    private var sampling: String?
    /// Roles of the messages seen here, and the messages that replaced an edited one.
    private var roles: [String: String] = [:]
    private var editedAs: Set<String> = []
    /// The quick replies under the newest message, which `/1`, `/2`… send.
    private var offered: [String] = []
    /// Tool calls waiting for somebody's yes, oldest first: `y`, `n`, /approve and /deny answer the first.
    private var awaitingApproval: [Waiting] = []
    /// Replies (by sequence number) whose tool calls are under way, or whose next turn is
    /// due after them: a reply in flight for Ctrl-C, though no text streams.
    private var chainsInFlight: Set<Int> = []
    /// Every call seen (in `tool_calls`, `tool.started`, `tool.approval_requested`), by call id.
    private var callsSeen: [String: ToolLines.Call] = [:]
    /// Tool messages seen, by id, and which answers which call, for /tool.
    private var toolMessages: [String: JSON] = [:]
    private var toolMessageOfCall: [String: String] = [:]
    private var newestTool: String?
    /// Replies whose replacement was said already: a whole chain is replaced at once.
    private var announcedReplaced: Set<String> = []

    private struct Waiting {
        var call: ToolLines.Call
        /// Its tool message's id.
        var message: String?
    }

    private enum Pending {
        case send, cancel, rename
        /// /model, /system: the change is shown when `conversation.updated` comes.
        case configure
        /// /retry, /edit-last, /continue: what follows comes as notifications.
        case revision
        case fork
        /// /approve, /deny, `y`, `n`: the answer is shown when `tool.approved` or `tool.denied` comes.
        case approve(Waiting)
    }

    init(connection: Connection, me: JSON, colour: Bool, render: Bool) {
        self.connection = connection
        myClientID = me["client_id"]?.string ?? ""
        myName = me["user"]?["name"]?.string ?? "you"
        transcript = Transcript(colour: colour, me: myClientID, render: render)
        // Ctrl-C and resizes are ours to handle only with a person at a terminal.
        signals = isatty(0) != 0 ? try? SignalPipe.install([SIGINT, SIGWINCH]) : nil
    }

    func startScreen() {
        let screen = ChatScreen()
        self.screen = screen
        transcript.screen = screen
    }

    func startEditor() {
        editor = LineEditor(prompt: prompt, historyFile: Self.historyFile())
    }

    /// The conversation's title, short, as the input line's prompt.
    private var prompt: String { DisplayWidth.truncate(SafeText.singleLine(title), to: 24) + "> " }

    /// `$XDG_STATE_HOME/confab/history`, one for every conversation, as a shell's is.
    private static func historyFile() -> String? {
        var state = Environment.get("XDG_STATE_HOME") ?? ""
        if !state.hasPrefix("/") {
            guard let home = Environment.get("HOME"), home.hasPrefix("/") else { return nil }
            state = home + "/.local/state"
        }
        var path = ""
        for component in (state + "/confab").split(separator: "/") {
            path += "/" + component
            _ = mkdir(path, 0o700)
        }
        return path + "/history"
    }

    /// The terminal as it was: the editor's mode undone, the whole screen scrolling again.
    func restoreTerminal() {
        editor?.stop()
        editor = nil
        transcript.breakLine()
        screen?.suspend()
        transcript.screen = nil
        screen = nil
    }

    /// Attaches to `id`, shows its header, history and the reply in flight.
    func attach(_ id: String, history: Int) throws(Failure) {
        let result = try connection.call("conversation.attach", ["conversation": .string(id), "history": .int(history)])
        conversation = id
        present = [:]
        for client in result["clients"]?.array ?? [] {
            if let clientID = client["id"]?.string { present[clientID] = client }
        }
        let info = result["conversation"]
        title = info?["title"]?.string ?? "untitled"
        model = info?["model"]?.string
        system = info?["system"]?.string
        profile = info?["profile"]?.string
        sampling = info?["params"]?.text
        editor?.setPrompt(prompt)
        var heading = "\(title) (\(id))"
        if let profile = info?["profile"]?.string { heading += " · profile \(profile)" }
        if let model = info?["model"]?.string { heading += " · \(model)" }
        transcript.header(heading, who: whoLine())
        let messages = result["messages"]?.array ?? []
        oldestShown = messages.first?["id"]?.string
        moreHistory = (info?["message_count"]?.int ?? 0) > messages.count
        offered = []
        awaitingApproval = []
        chainsInFlight = []
        callsSeen = [:]
        toolMessages = [:]
        toolMessageOfCall = [:]
        newestTool = nil
        announcedReplaced = []
        showHistory(messages, newest: result["pending"]?["id"]?.string == nil)
        if let pending = result["pending"], pending["id"]?.string != nil {
            transcript.replyStarted(pending)
        }
        // The calls of the reply in flight that have not ended: running, or waiting for a yes.
        for tool in result["tools"]?.array ?? [] {
            note(tool)
            guard let id = tool["id"]?.string, let callID = ToolLines.callID(of: tool) else { continue }
            if let sequence = ToolLines.sequence(id) { chainsInFlight.insert(sequence) }
            if tool["approval"]?.string == "pending" {
                let call = callsSeen[callID] ?? ToolLines.Call(id: callID, name: ToolLines.name(of: tool), arguments: "")
                askApproval(Waiting(call: call, message: id))
            } else {
                transcript.toolInFlight(tool)
            }
        }
    }

    private func whoLine() -> String {
        let names = [myName + " (you)"] + present.values.map { Words.clientName($0) }.sorted()
        return "here: " + names.joined(separator: ", ")
    }

    func run() throws(Failure) {
        while true {
            // Everything already read is handled before waiting for more.
            while let event = connection.nextEvent() { try handle(event) }
            transcript.flush()
            if !inputOpen && outstanding.isEmpty { leave() }

            var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)]
            let inputIndex = fds.count
            if inputOpen { fds.append(pollfd(fd: 0, events: Int16(POLLIN), revents: 0)) }
            let signalIndex = fds.count
            if let signals { fds.append(pollfd(fd: signals, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), transcript.statusTickMilliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                throw .message("poll failed: \(errorText(errno))")
            }
            transcript.tick()
            if signals != nil, fds[signalIndex].revents != 0 {
                for signal in SignalPipe.drain() { try caught(signal) }
            }
            if fds[0].revents != 0 {
                if !(try connection.receive()) {
                    transcript.breakLine()
                    throw .disconnected
                }
            }
            if inputOpen, fds[inputIndex].revents != 0 {
                if let editor {
                    for input in editor.readKey() {
                        switch input {
                        case .line(let text): try typed(Array(text.utf8))
                        case .end: leave()
                        }
                    }
                } else {
                    try readInput()
                }
            }
        }
    }

    private func caught(_ signal: Int32) throws(Failure) {
        switch signal {
        case SIGINT:
            if transcript.replyInFlight || !chainsInFlight.isEmpty {
                try cancel()
            } else if let editor {
                editor.clearLine()
            } else {
                // What was typed and not yet sent goes; leaving is Ctrl-D or /quit.
                tcflush(0, TCIFLUSH)
                input = []
                transcript.notice("line cleared (Ctrl-D or /quit leaves)")
            }
        case SIGWINCH:
            screen?.resized()
            transcript.resized()
            editor?.resized()
        default:
            break
        }
    }

    private func cancel() throws(Failure) {
        let id = try connection.send("generation.cancel", ["conversation": .string(conversation)])
        outstanding[id] = .cancel
    }

    private func handle(_ event: Event) throws(Failure) {
        switch event {
        case .notification(let method, let params):
            try notification(method, params)
        case .response(let id, let result):
            guard let pending = outstanding.removeValue(forKey: id) else { return }
            switch (pending, result) {
            case (.send, .failure(let error)): transcript.error("not sent: \(error.message)")
            case (.cancel, .success(let value)) where value["cancelled"]?.isNull ?? true:
                chainsInFlight = []
                transcript.notice("nothing to cancel")
            case (.approve(let waiting), .failure(let error)) where error.code == RPCError.conflict:
                // Somebody answered first, or the call ended: not ours to worry about.
                transcript.notice(error.message.contains(waiting.call.id) ? error.message : "call \(waiting.call.id): \(error.message)")
            case (.approve(let waiting), .failure(let error)):
                if !awaitingApproval.contains(where: { $0.call.id == waiting.call.id }) { awaitingApproval.insert(waiting, at: 0) }
                transcript.error(error.message)
            case (.fork, .success(let value)):
                let made = value["conversation"]?["id"]?.string ?? "?"
                transcript.notice("forked as \(made): /switch \(made) to go there" + (value["reply"] != nil ? " (its last question is being answered)" : ""))
            case (_, .failure(let error)): transcript.error(error.message)
            default: break
            }
        case .fatal(let error):
            transcript.breakLine()
            throw .rpc(error)
        }
    }

    private func notification(_ method: String, _ params: JSON) throws(Failure) {
        if method == "server.stopping" {
            let reason = params["reason"]?.string.map { ": \($0)" } ?? ""
            transcript.notice("confabd is stopping\(reason)")
            throw .exit(0)
        }
        // Everything else is about one conversation; we follow only ours.
        guard params["conversation"]?.string == conversation else { return }
        switch method {
        case "message.created":
            guard let message = params["message"] else { return }
            note(message)
            if ToolLines.isTool(message) {
                // A call is followed through tool.started and tool.completed.
                if message["status"]?.string != "streaming" { toolEnded(message) }
                return
            }
            // What was offered answered the message before this one.
            offered = []
            if message["role"]?.string == "assistant" && message["status"]?.string == "streaming" {
                transcript.replyStarted(message)
            } else {
                transcript.message(message)
            }
        case "message.delta":
            guard let id = params["message"]?.string, let piece = params["content"]?.string else { return }
            transcript.delta(id: id, piece)
        case "message.continued":
            guard let message = params["message"] else { return }
            transcript.replyContinued(message)
        case "message.superseded":
            guard let message = params["message"]?.string, let by = params["by"]?.string else { return }
            // A reply's whole chain (its results and later turns) is replaced with it: said
            // once, of the reply's first message.
            let id = ToolLines.head(message) ?? message
            let newer = ToolLines.head(by) ?? by
            guard !announcedReplaced.contains(id) else { return }
            announcedReplaced.insert(id)
            switch roles[id] ?? roles[message] {
            case "user"?:
                editedAs.insert(newer)
                transcript.notice("\(id) was edited: \(newer) takes its place")
            case "assistant"? where editedAs.contains(newer):
                transcript.notice("the reply \(id) is left out: its question was edited")
            case "assistant"?:
                transcript.notice("the reply \(id) is replaced by \(newer) (/versions lists earlier replies)")
            default:
                transcript.notice("\(id) is replaced by \(newer)")
            }
        case "message.retrying":
            guard let id = params["message"]?.string else { return }
            transcript.retrying(id: id, attempt: params["attempt"]?.int ?? 1, reason: Words.replyError(params["error"]),
                                milliseconds: params["delay_ms"]?.int ?? 0)
        case "generation.cancelled":
            guard let id = params["message"]?.string else { return }
            transcript.cancelled(id: id, by: params["by"]?["id"]?.string == myClientID ? "you" : Words.clientName(params["by"]))
        case "message.completed", "message.failed":
            guard let message = params["message"] else { return }
            note(message)
            if ToolLines.isTool(message) {
                toolEnded(message)
                return
            }
            let error = method == "message.failed" ? Words.replyError(params["error"] ?? message["error"]) : nil
            transcript.replyEnded(message, error: error)
            followChain(message)
        case "tool.approval_requested":
            guard let callID = params["call"]?.string else { return }
            let call = ToolLines.Call(id: callID, name: params["tool"]?.string ?? callsSeen[callID]?.name ?? "?",
                                      arguments: params["arguments"]?.string ?? callsSeen[callID]?.arguments ?? "")
            callsSeen[callID] = call
            let message = params["message"]?["id"]?.string ?? params["message"]?.string
            if let sequence = ToolLines.sequence(message) { chainsInFlight.insert(sequence) }
            if let tool = params["message"], tool["id"] != nil { note(tool) }
            askApproval(Waiting(call: call, message: message))
        case "tool.approved", "tool.denied":
            guard let callID = params["call"]?.string else { return }
            awaitingApproval.removeAll { $0.call.id == callID }
            transcript.toolAnswered(call: callID)
            let verb = method == "tool.approved" ? "approved" : "denied"
            if let client = params["client"], !client.isNull {
                let who = client["id"]?.string == myClientID ? "you" : Words.clientName(client)
                transcript.notice("call \(callID) \(verb) by \(who)")
            } else {
                transcript.notice("call \(callID) \(verb): nobody answered in time")
            }
        case "tool.started":
            guard let call = ToolLines.call(params["call"]) else { return }
            callsSeen[call.id] = call
            awaitingApproval.removeAll { $0.call.id == call.id }
            if let tool = params["message"] {
                note(tool)
                if let sequence = ToolLines.sequence(tool["id"]?.string) { chainsInFlight.insert(sequence) }
            }
            transcript.toolStarted(call: call.id, name: call.name)
        case "tool.completed":
            guard let message = params["message"] else { return }
            note(message)
            toolEnded(message)
        case "conversation.updated":
            let info = params["info"]
            let newTitle = info?["title"]?.string ?? title
            let newModel = info?["model"]?.string ?? model
            let newSystem = info?["system"]?.string
            let newProfile = info?["profile"]?.string
            let newParams = info?["params"]?.text
            let configured = newModel != model || newSystem != system || newProfile != profile || newParams != sampling
            if newProfile != profile { transcript.notice("profile: \(newProfile ?? "none")") }
            if newModel != model { transcript.notice("model: \(newModel ?? "?")") }
            if newSystem != system { transcript.notice(newSystem.map { "system prompt: \($0)" } ?? "system prompt cleared") }
            // A rename says its title even when unchanged: it was asked for.
            if newTitle != title || !configured { transcript.notice("title: \(newTitle)") }
            title = newTitle
            model = newModel
            system = newSystem
            profile = newProfile
            if newParams != sampling { transcript.notice("parameters: \(newParams ?? "{}")") }
            sampling = newParams
            editor?.setPrompt(prompt)
        case "conversation.deleted":
            transcript.notice("the conversation was deleted")
            throw .exit(0)
        case "client.attached":
            guard let client = params["client"], let id = client["id"]?.string else { return }
            present[id] = client
            transcript.notice("\(Words.clientName(client)) joined")
        case "client.detached":
            guard let client = params["client"], let id = client["id"]?.string else { return }
            present[id] = nil
            transcript.notice("\(Words.clientName(client)) left")
        default:
            return
        }
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
            if interactive, input.last == 0x0A { transcript.inputEchoed() }
        }
        while let newline = input.firstIndex(of: 0x0A) {
            let line = Array(input[..<newline])
            input.removeSubrange(...newline)
            try typed(line)
        }
        if !inputOpen, !input.isEmpty {
            // The last line had no newline; it is a line all the same.
            let line = input
            input = []
            try typed(line)
        }
    }

    private func typed(_ bytes: [UInt8]) throws(Failure) {
        var bytes = bytes
        if bytes.last == 0x0D { bytes.removeLast() }
        var text = String(decoding: bytes, as: UTF8.self)
        // A paste that ended with a line break does not send it.
        while text.hasSuffix("\n") { text.removeLast() }
        if text.isBlank { return }
        // While a call waits for a yes, `y` or `n` alone answers it; anything longer is a message.
        if !awaitingApproval.isEmpty, let allow = Self.yesOrNo(text) {
            try answer(allow: allow, call: nil)
            return
        }
        // The number alone picks a quick reply, as /N does, but only while some are offered:
        // otherwise a number is a message like any other.
        if !offered.isEmpty, let number = Int(text.trimmed), (1...offered.count).contains(number) {
            try send(offered[number - 1])
        } else if text.hasPrefix("//") {
            try send(String(text.dropFirst()))
        } else if text.hasPrefix("/") {
            try command(text)
        } else {
            try send(text)
        }
    }

    private func send(_ text: String) throws(Failure) {
        // Not printed here: the daemon echoes it back as message.created.
        let id = try connection.send("message.send", ["conversation": .string(conversation), "content": .string(text)])
        outstanding[id] = .send
    }

    // MARK: Slash commands

    static let help = """
        /help            this list
        /cancel          stop the reply in flight (Ctrl-C does too)
        /history [N]     show N (default 20) earlier messages
        /who             who is attached
        /rename TITLE    retitle the conversation
        /model NAME      ask the next replies of the model NAME
        /system [TEXT]   the system prompt for the next replies (nothing clears it)
        /switch ID       attach to another conversation instead
        /new [TITLE]     start a conversation and switch to it
        /edit            write a message in $EDITOR, then send it
        /retry           a new reply to the last message (the old one is kept)
        /versions [ID]   earlier versions of the last reply (or of reply ID)
        /edit-last       change your last message in $EDITOR and get a new reply
        /continue        continue a reply cut off at the model's length limit
        /fork [MSG]      copy the conversation (up to message MSG) into a new one
        /tool [ID]       all a tool answered (ID: a call id or a message id such as m2.1; default the latest)
        /approve [CALL]  let a tool call that waits for approval run (default the oldest; y alone does too)
        /deny [CALL]     refuse it (n alone on a line does too)
        /N               send quick reply N (the number alone on a line does too)
        /quit            detach and leave (Ctrl-D does too)
        //text           send a line that starts with a slash
        """

    private func command(_ line: String) throws(Failure) {
        let words = line.dropFirst().split(separator: " ", maxSplits: 1).map(String.init)
        let name = words.first ?? ""
        let argument = words.count > 1 ? words[1].trimmed : ""
        switch name {
        case "help":
            transcript.block(Self.help)
        case "cancel":
            try cancel()
        case "history":
            let count = argument.isEmpty ? 20 : Int(argument) ?? -1
            guard (1...1000).contains(count) else {
                transcript.error("/history takes a number of messages, 1 to 1000")
                return
            }
            try earlier(count)
        case "who":
            transcript.notice(whoLine())
        case "rename":
            guard !argument.isEmpty else {
                transcript.error("/rename needs a title")
                return
            }
            let id = try connection.send("conversation.rename", ["conversation": .string(conversation), "title": .string(argument)])
            outstanding[id] = .rename
        case "model":
            guard !argument.isEmpty, !argument.contains(where: \.isWhitespace) else {
                transcript.error("/model needs a model name (confab models lists them)")
                return
            }
            outstanding[try connection.send("conversation.configure", ["conversation": .string(conversation), "model": .string(argument)])] = .configure
        case "system":
            outstanding[try connection.send("conversation.configure", ["conversation": .string(conversation), "system": .string(argument)])] = .configure
        case "switch":
            guard !argument.isEmpty else {
                transcript.error("/switch needs a conversation id")
                return
            }
            do throws(Failure) {
                try switchTo(try connection.resolveConversation(argument))
            } catch {
                if case .message(let text) = error { transcript.error(text) } else { throw error }
            }
        case "new":
            let made = try createConversation(connection, title: argument.isEmpty ? nil : argument, system: nil, model: nil)
            try switchTo(made.id)
        case "edit":
            try edit()
        case "retry":
            outstanding[try connection.send("message.regenerate", ["conversation": .string(conversation)])] = .revision
        case "continue":
            outstanding[try connection.send("message.continue", ["conversation": .string(conversation)])] = .revision
        case "versions":
            try versions(of: argument.isEmpty ? nil : argument)
        case "approve", "deny":
            try answer(allow: name == "approve", call: argument.isEmpty ? nil : argument)
        case "tool":
            try showTool(argument.isEmpty ? nil : argument)
        case "edit-last":
            try editLast()
        case "fork":
            if !argument.isEmpty, MessageID.sequence(of: argument) == nil {
                transcript.error("/fork takes a message id such as m4 (confab show lists them), or nothing for all")
                return
            }
            var params: [String: JSON] = ["conversation": .string(conversation)]
            if !argument.isEmpty { params["at"] = .string(argument) }
            outstanding[try connection.send("conversation.fork", .object(params))] = .fork
        case "quit", "exit":
            leave()
        default:
            if let number = Int(name), argument.isEmpty {
                guard (1...max(1, offered.count)).contains(number), !offered.isEmpty else {
                    transcript.error(offered.isEmpty ? "no quick replies are offered" : "/\(number): the quick replies are /1 to /\(offered.count)")
                    return
                }
                try send(offered[number - 1])
                return
            }
            transcript.error("unknown command /\(name) (/help lists them; // sends a line starting with a slash)")
        }
    }

    private func earlier(_ count: Int) throws(Failure) {
        guard moreHistory, let before = oldestShown else {
            transcript.notice("nothing earlier")
            return
        }
        let page = try connection.call("conversation.history",
                                       ["conversation": .string(conversation), "before": .string(before), "limit": .int(count)])
        let messages = page["messages"]?.array ?? []
        moreHistory = page["more"]?.bool ?? false
        if let first = messages.first?["id"]?.string { oldestShown = first }
        transcript.notice("\(Words.count(messages.count, "earlier message"))" + (moreHistory ? " (more with /history)" : ""))
        showHistory(messages)
        transcript.notice("back to now")
    }

    private func switchTo(_ id: String) throws(Failure) {
        guard id != conversation else { return }
        _ = try connection.call("conversation.detach", ["conversation": .string(conversation)])
        transcript.reset()
        try attach(id, history: 20)
    }

    /// Stored messages, the way the conversation reads now: a message replaced by a newer one
    /// (a regenerated reply with its tool calls and later turns, an edited message) is left
    /// out, and a reply with earlier versions says so once it is shown whole.
    private func showHistory(_ messages: [JSON], newest: Bool = false) {
        for message in messages { note(message) }
        func head(_ message: JSON) -> String { message["id"]?.string.flatMap(ToolLines.head) ?? "" }
        let replaced = Set(messages.compactMap { $0["superseded_by"]?.string.flatMap(ToolLines.head) })
        // A reply replaced is replaced whole, whether or not each of its steps says so.
        let replacedReplies = Set(messages.filter { $0["superseded_by"] != nil && !ToolLines.isStep($0["id"]?.string) }.map(head))
        let shown = messages.filter { $0["superseded_by"] == nil && !(ToolLines.isStep($0["id"]?.string) && replacedReplies.contains(head($0))) }
        for (index, message) in shown.enumerated() {
            transcript.message(message)
            // Offered only under the newest message: once answered they are history.
            if newest, index == shown.count - 1, let replies = message["quick_replies"]?.array?.compactMap(\.string), !replies.isEmpty {
                offered = replies
                transcript.quickReplies(replies)
            }
            let endsItsReply = index == shown.count - 1 || head(shown[index + 1]) != head(message)
            if endsItsReply, message["role"]?.string != "user", replaced.contains(head(message)) {
                transcript.notice("an earlier version exists: /versions")
            }
        }
    }

    /// Remembers who wrote a message, to say what a `message.superseded` means, and the tool
    /// calls and results it holds, for /tool and /approve.
    private func note(_ message: JSON) {
        guard let id = message["id"]?.string else { return }
        if let role = message["role"]?.string { roles[id] = role }
        for call in ToolLines.calls(of: message) { callsSeen[call.id] = call }
        guard ToolLines.isTool(message) else { return }
        toolMessages[id] = message
        if let call = ToolLines.callID(of: message) { toolMessageOfCall[call] = id }
        if let order = MessageID.order(of: id), newestTool.flatMap(MessageID.order(of:)).map({ $0 < order }) ?? true {
            newestTool = id
        }
    }

    /// /versions: the replies a reply replaced, oldest first, each with its tool calls and
    /// later turns, then which one is current.
    private func versions(of given: String?) throws(Failure) {
        let messages = try wholeHistory(connection, conversation)
        func head(_ id: String?) -> String? { id.flatMap(ToolLines.head) }
        guard let current = head(given ?? messages.last(where: { $0["role"]?.string == "assistant" && $0["superseded_by"] == nil })?["id"]?.string) else {
            transcript.notice(given == nil ? "no reply yet" : "/versions takes a reply's id, such as m4")
            return
        }
        var chain: [String] = []
        var newer = current
        while let older = head(messages.last(where: {
            head($0["superseded_by"]?.string) == newer && $0["role"]?.string == "assistant" && !ToolLines.isStep($0["id"]?.string)
        })?["id"]?.string), older != newer, !chain.contains(older) {
            chain.insert(older, at: 0)
            newer = older
        }
        guard !chain.isEmpty else {
            transcript.notice("\(current) has no earlier versions")
            return
        }
        for (number, reply) in chain.enumerated() {
            transcript.notice("version \(number + 1) of \(chain.count + 1) (\(reply))")
            for message in messages where head(message["id"]?.string) == reply && message["role"]?.string != "user" {
                transcript.message(message)
            }
        }
        transcript.notice("version \(chain.count + 1) (\(current)) is the current one")
    }

    // MARK: Tools

    /// `y` or `n` (either case) alone: an answer to the call waiting for one.
    static func yesOrNo(_ text: String) -> Bool? {
        switch text.trimmed.lowercased() {
        case "y": return true
        case "n": return false
        default: return nil
        }
    }

    /// A call waits for a yes: the question, saying how to answer it.
    private func askApproval(_ waiting: Waiting) {
        guard !awaitingApproval.contains(where: { $0.call.id == waiting.call.id }) else { return }
        awaitingApproval.append(waiting)
        // `y` and `n` answer the oldest; the others are named.
        let how = awaitingApproval.count == 1 ? "/approve or /deny (or y/n)"
            : "/approve \(waiting.call.id) or /deny \(waiting.call.id)"
        transcript.toolApprovalRequested(call: waiting.call.id, name: waiting.call.name, arguments: waiting.call.arguments, how: how)
    }

    /// `tool.approve` for `given` (a call id, or the id of the tool message answering it), or
    /// for the oldest call waiting.
    private func answer(allow: Bool, call given: String?) throws(Failure) {
        var waiting: Waiting
        if let given {
            var callID = given
            if MessageID.order(of: given) != nil {
                guard let known = ToolLines.callID(of: toolMessages[given]) else {
                    transcript.error("\(given) is no tool call seen here (give the call's id)")
                    return
                }
                callID = known
            }
            waiting = awaitingApproval.first { $0.call.id == callID }
                ?? Waiting(call: callsSeen[callID] ?? ToolLines.Call(id: callID, name: "?", arguments: ""), message: nil)
        } else {
            guard let oldest = awaitingApproval.first else {
                transcript.error("no tool call is waiting for approval")
                return
            }
            waiting = oldest
        }
        // Answered as far as we are concerned: `y` again answers the next one.
        awaitingApproval.removeAll { $0.call.id == waiting.call.id }
        let id = try connection.send("tool.approve", ["conversation": .string(conversation), "call": .string(waiting.call.id),
                                                      "allow": .bool(allow)])
        outstanding[id] = .approve(waiting)
    }

    /// A call ended: its result under it, and it waits for nobody any more.
    private func toolEnded(_ message: JSON) {
        if let call = ToolLines.callID(of: message) { awaitingApproval.removeAll { $0.call.id == call } }
        transcript.toolCompleted(message)
    }

    /// A reply turn ended: its reply goes on when it asked for tools, else it is over.
    private func followChain(_ message: JSON) {
        guard message["role"]?.string == "assistant", let id = message["id"]?.string, let sequence = ToolLines.sequence(id) else { return }
        if ToolLines.continuesAfter(message) {
            chainsInFlight.insert(sequence)
        } else {
            chainsInFlight.remove(sequence)
            awaitingApproval.removeAll { ToolLines.sequence($0.message) == sequence }
        }
    }

    /// /tool: everything a tool answered; the latest call's without an id.
    private func showTool(_ given: String?) throws(Failure) {
        func matches(_ message: JSON) -> Bool {
            guard ToolLines.isTool(message) else { return false }
            guard let given else { return true }
            return message["id"]?.string == given || ToolLines.callID(of: message) == given
        }
        let known = given.map { toolMessages[$0] ?? toolMessageOfCall[$0].flatMap { toolMessages[$0] } } ?? newestTool.flatMap { toolMessages[$0] }
        var found = known
        if found == nil {
            // Older than what this screen has seen: the conversation's history has it.
            found = try wholeHistory(connection, conversation).last(where: matches)
        }
        guard let message = found else {
            transcript.error(given.map { "no tool call \($0) in this conversation (give a call id, or a tool message id such as m2.1)" }
                             ?? "no tool was called in this conversation yet")
            return
        }
        transcript.toolDetail(message, arguments: ToolLines.callID(of: message).flatMap { callsSeen[$0]?.arguments })
    }

    /// /edit-last: your last message in `$EDITOR`; saved changed, it replaces the message and
    /// the replies to it, and is answered again.
    private func editLast() throws(Failure) {
        let messages = try wholeHistory(connection, conversation)
        guard let last = messages.last(where: { $0["role"]?.string == "user" && $0["superseded_by"] == nil }),
              let id = last["id"]?.string else {
            transcript.notice("no message to edit")
            return
        }
        guard let text = composeInEditor(initial: last["content"]?.string ?? "", command: "/edit-last") else { return }
        if text.isBlank || text == last["content"]?.string {
            transcript.notice("unchanged: nothing sent")
            return
        }
        outstanding[try connection.send("message.edit", ["conversation": .string(conversation), "message": .string(id),
                                                         "content": .string(text)])] = .revision
    }

    /// `$EDITOR` (else `$VISUAL`, else vi) on an empty file; what it holds after is sent.
    private func edit() throws(Failure) {
        guard let text = composeInEditor(initial: "", command: "/edit") else { return }
        if text.isBlank {
            transcript.notice("nothing to send")
        } else {
            try send(text)
        }
    }

    /// The user's editor on a file holding `initial`; what it holds after, or nil when the
    /// editor failed (said on the screen).
    private func composeInEditor(initial: String, command: String) -> String? {
        let editor = Environment.get("VISUAL").flatMap { $0.isEmpty ? nil : $0 }
            ?? Environment.get("EDITOR").flatMap { $0.isEmpty ? nil : $0 } ?? "vi"
        let text: String
        // The editor gets the whole terminal, as it was before us, and gives it back.
        let lineEditor = self.editor
        lineEditor?.stop()
        screen?.suspend()
        defer {
            if lineEditor != nil {
                screen?.resume()
                self.editor = LineEditor(prompt: prompt, historyFile: Self.historyFile())
            }
        }
        do {
            text = try Editor.compose(with: editor, initial: initial)
        } catch {
            transcript.error("\(command): \(error)")
            return nil
        }
        transcript.inputEchoed()
        return text
    }

    /// End of input, every send answered, or /quit: detach and leave.
    private func leave() -> Never {
        restoreTerminal()
        _ = try? connection.call("conversation.detach", ["conversation": .string(conversation)])
        Out.exit(0)
    }
}

/// Writing a message in the user's editor.
enum Editor {
    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    static func compose(with editor: String, initial: String = "") throws(Failed) -> String {
        var template = Array(((Environment.get("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp") + "/confab-message-XXXXXX.md").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, 3) }
        guard fd >= 0 else { throw Failed(description: "cannot make a temporary file: \(errorText(errno))") }
        let written = initial.isEmpty ? nil : Files.writeAll(fd, Array((initial + "\n").utf8)).failure
        close(fd)
        if let written { throw Failed(description: "cannot write a temporary file: \(errorText(written))") }
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(path) }
        // Through the shell, as git runs it: EDITOR may hold arguments ("code --wait").
        let status = Spawn.wait(["/bin/sh", "-c", editor + " \"$1\"", "sh", path])
        guard status == 0 else { throw Failed(description: "\(editor) exited with status \(status); nothing sent") }
        do {
            var bytes = try Files.readAll(path: path, limit: 4 << 20)
            while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
            return String(decoding: bytes, as: UTF8.self)
        } catch {
            throw Failed(description: "cannot read \(path): \(error)")
        }
    }
}
