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
    @Option(help: "How many earlier messages to show (0…1000).") var history = 20
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

    private enum Pending {
        case send, cancel, rename
        /// /model, /system: the change is shown when `conversation.updated` comes.
        case configure
        /// /retry, /edit-last, /continue: what follows comes as notifications.
        case revision
        case fork
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
        showHistory(messages, newest: result["pending"]?["id"]?.string == nil)
        if let pending = result["pending"], pending["id"]?.string != nil {
            transcript.replyStarted(pending)
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
            if transcript.replyInFlight {
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
            case (.cancel, .success(let value)) where value["cancelled"]?.isNull ?? true: transcript.notice("nothing to cancel")
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
            guard let id = params["message"]?.string, let newer = params["by"]?.string else { return }
            switch roles[id] {
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
        case "message.completed":
            guard let message = params["message"] else { return }
            transcript.replyEnded(message, error: nil)
        case "message.failed":
            guard let message = params["message"] else { return }
            transcript.replyEnded(message, error: Words.replyError(params["error"] ?? message["error"]))
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
    /// (a regenerated reply, an edited message) is left out, and a reply with earlier versions
    /// says so.
    private func showHistory(_ messages: [JSON], newest: Bool = false) {
        for message in messages { note(message) }
        let replaced = Set(messages.compactMap { $0["superseded_by"]?.string })
        let shown = messages.filter { $0["superseded_by"] == nil }
        for message in shown {
            transcript.message(message)
            // Offered only under the newest message: once answered they are history.
            if newest, message["id"] == shown.last?["id"], let replies = message["quick_replies"]?.array?.compactMap(\.string), !replies.isEmpty {
                offered = replies
                transcript.quickReplies(replies)
            }
            if let id = message["id"]?.string, message["role"]?.string == "assistant", replaced.contains(id) {
                transcript.notice("an earlier version exists: /versions")
            }
        }
    }

    /// Remembers who wrote a message, to say what a `message.superseded` means.
    private func note(_ message: JSON) {
        if let id = message["id"]?.string, let role = message["role"]?.string { roles[id] = role }
    }

    /// /versions: the replies a reply replaced, oldest first, then which one is current.
    private func versions(of given: String?) throws(Failure) {
        let messages = try wholeHistory(connection, conversation)
        guard let current = given ?? messages.last(where: { $0["role"]?.string == "assistant" && $0["superseded_by"] == nil })?["id"]?.string else {
            transcript.notice("no reply yet")
            return
        }
        var chain: [JSON] = []
        var newer = current
        while let older = messages.last(where: { $0["superseded_by"]?.string == newer && $0["role"]?.string == "assistant" }) {
            chain.insert(older, at: 0)
            newer = older["id"]?.string ?? ""
        }
        guard !chain.isEmpty else {
            transcript.notice("\(current) has no earlier versions")
            return
        }
        for (number, message) in chain.enumerated() {
            transcript.notice("version \(number + 1) of \(chain.count + 1) (\(message["id"]?.string ?? "?"))")
            transcript.message(message)
        }
        transcript.notice("version \(chain.count + 1) (\(current)) is the current one")
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
