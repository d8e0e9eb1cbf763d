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
            with a slash. Ctrl-C clears the line being typed; on an empty line it stops the reply \
            in flight (you stay attached). Ctrl-D (end of input) detaches. Your name is --name, else $CONFAB_NAME, \
            else login@tty. Alt-Enter puts a line break in the message. Replies are rendered \
            from markdown on a terminal; --raw (or --plain) shows their text as it is, and \
            NO_COLOR keeps the layout without colours.

            When confabd stops or restarts, attach says so, waits for it to come back (Ctrl-D \
            leaves meanwhile), then shows what it missed and goes on.

            /attach PATH... adds files to the next message you send (text files and PNG, JPEG, \
            GIF or WebP images, as with ask -a): they are read and checked at once; a path with \
            spaces goes in quotes or with a backslash before each space, ~/ is your home, and \
            Tab completes paths. /attach alone lists the files waiting (name, size, type); \
            /detach drops them. They stay attached until the message is stored. Every screen \
            shows [attached: NAME, SIZE, TYPE] under a message that carries files.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix); without one, this shell's conversation (the one ask -C continues), else the most recently active one.",
              completion: .conversationIDs) var id: String?
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
        let conversation = try id.map(connection.resolveConversation) ?? ConversationChoice.toAttach(connection)
        let colour = !plain && isatty(1) != 0 && (Environment.get("NO_COLOR") ?? "").isEmpty
        let session = AttachSession(connection: connection, socketPath: socketPath, name: name, me: me, colour: colour,
                                    render: !plain && isatty(1) != 0)
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
/// the signals we act on (Ctrl-C, a resized window). Each reply in flight is followed by a
/// `ReplyFollower`, and the transcript shows what it reports. When confabd goes away the
/// session waits for it, attaches again and shows what it missed.
final class AttachSession {
    var connection: Connection
    let socketPath: String
    /// The display name asked for (`--name`), given again when we reconnect.
    let requestedName: String?
    var conversation = ""
    let transcript: Transcript
    var myClientID: String
    let myName: String
    /// Others attached, by client id.
    var present: [String: ClientInfo] = [:]
    /// The oldest message shown, for /history.
    var oldestShown: String?
    var moreHistory = true
    /// Requests sent and not yet answered: id → what to do with the answer.
    var outstanding: [Int: Pending] = [:]
    var input: [UInt8] = []
    var inputOpen = true
    let interactive = isatty(0) != 0
    let signals: Int32?
    var screen: ChatScreen?
    var editor: LineEditor?
    var title = ""
    /// The model and system prompt as last announced, to say which of them a `conversation.updated` changed.
    var model: String?
    var system: String?
    var profile: String?
    var sampling: String?
    /// Who else may see the conversation, as the notices say it (`bob (write), carol (read)`).
    var sharing: String?
    /// Our role when the conversation is another's, shared with us; nil when it is ours.
    var sharedRole: ShareRole? {
        didSet { transcript.continuesReplies = sharedRole != .read }
    }
    /// Roles of the messages seen here, and the messages that replaced an edited one.
    var roles: [String: Role] = [:]
    var editedAs: Set<String> = []
    /// The quick replies under the newest message, which `/1`, `/2`… send.
    var offered: [String] = []
    /// Tool calls waiting for somebody's yes, oldest first: `y`, `n`, /approve and /deny answer the first.
    var awaitingApproval: [Waiting] = []
    /// The replies in flight, by sequence number, each followed from its start (or from
    /// when we attached) to its chain's end: a reply running tools is in flight for Ctrl-C
    /// too, though no text streams.
    var followers: [Int: ReplyFollower] = [:]
    /// The newest message seen here: after a reconnection, what is newer was missed.
    var newestSeen: MessageOrder?
    /// Every call seen (in `tool_calls`, `tool.started`, `tool.approval_requested`), by call id.
    var callsSeen: [String: ToolCall] = [:]
    /// Tool messages seen, by id, and which answers which call, for /tool.
    var toolMessages: [String: Message] = [:]
    var toolMessageOfCall: [String: String] = [:]
    var newestTool: String?
    /// Replies whose replacement was said already: a whole chain is replaced at once.
    var announcedReplaced: Set<String> = []
    /// The summary in force, shown as one line where it stands (`/summary` prints it).
    var compaction: Compaction?
    /// Files `/attach` read, which the next message sent carries (`AttachFiles.swift`).
    var pendingFiles: [FileAttachment] = [] {
        // The input line's prompt says the next message carries files.
        didSet { if pendingFiles.count != oldValue.count { editor?.setPrompt(prompt) } }
    }
    /// The files of sends not yet answered, by request id: dropped once the message is
    /// stored, pending again when it is not.
    var filesInFlight: [Int: [FileAttachment]] = [:]
    /// The terminal's notification, on a chat screen when the config or the environment asks for one (`AttachNotify.swift`).
    var notifier: AttachNotifier?
    /// When a key was last pressed here: a reply that ends long after is worth a notification.
    var lastKey = Timestamp.now()

    struct Waiting {
        var call: ToolCall
    }

    enum Pending {
        case send, cancel, rename
        /// /model, /system: the change is shown when `conversation.updated` comes.
        case configure
        /// /retry, /edit-last, /continue: what follows comes as notifications.
        case revision
        case fork
        /// /share, /unshare: the change is shown when `conversation.updated` comes.
        case share
        /// /approve, /deny, `y`, `n`: the answer is shown when `tool.approved` or `tool.denied` comes.
        case approve(Waiting)
        /// /tools --restart: the server's state is shown once it is ready or has failed.
        case restartServer
    }

    init(connection: Connection, socketPath: String, name: String?, me: HelloResult, colour: Bool, render: Bool) {
        self.connection = connection
        self.socketPath = socketPath
        requestedName = name
        myClientID = me.clientID
        myName = me.name ?? "you"
        transcript = Transcript(colour: colour, me: myClientID, render: render)
        // Ctrl-C and resizes are ours to handle only with a person at a terminal.
        signals = isatty(0) != 0 ? try? SignalPipe.install([SIGINT, SIGWINCH]) : nil
    }

    func startScreen() {
        notifier = AttachNotifier.fromConfig { Out.errorLine("confab: " + $0) }
        let screen = ChatScreen()
        self.screen = screen
        transcript.screen = screen
    }

    func startEditor() {
        editor = LineEditor(prompt: prompt, historyFile: Self.historyFile(), completer: completer)
    }

    /// Tab in the input line (`AttachChoice.swift`); the conversations are asked for at each press.
    var completer: LineEditor.Completer {
        { [weak self] line in
            guard let self else { return [] }
            return self.completions(of: line) {
                (try? self.connection.call(ListCall.self, ListParams(limit: 200)))?.conversations ?? []
            }
        }
    }

    /// One conversation Tab could complete to, listed above the input line.
    func listCompletion(_ id: String, title: String) {
        transcript.notice(id + "  " + title)
    }

    /// The conversation's title, short, as the input line's prompt, and how many files the
    /// next message carries (`chat +2 files> `).
    var prompt: String {
        DisplayWidth.truncate(SafeText.singleLine(title), to: 24) + (pendingFiles.isEmpty ? "" : " +" + Words.count(pendingFiles.count, "file")) + "> "
    }

    /// `$XDG_STATE_HOME/confab/history`, one for every conversation, as a shell's is.
    static func historyFile() -> String? {
        var state = Environment.get("XDG_STATE_HOME") ?? ""
        if !state.hasPrefix("/") {
            guard let home = Environment.get("HOME"), home.hasPrefix("/") else { return nil }
            state = home + "/.local/state"
        }
        // Without the directory the history is not kept, and editing goes on all the same.
        try? Files.makeDirectories(state + "/confab")
        return state + "/confab/history"
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
        let result = try connection.call(AttachCall.self, AttachParams(conversation: id, history: history))
        conversation = id
        present = [:]
        for client in result.clients { present[client.id] = client }
        let info = result.conversation
        title = info?.title ?? "untitled"
        model = info?.model
        system = info?.system
        profile = info?.profile
        sampling = info?.params.json.text
        sharing = SharedUser.list(info?.sharedWith ?? [])
        sharedRole = info?.roleOfThisUser
        editor?.setPrompt(prompt)
        var heading = "\(title) (\(id))"
        if let profile = info?.profile { heading += " · profile \(profile)" }
        if let model = info?.model { heading += " · \(model)" }
        transcript.header(heading, who: whoLine())
        oldestShown = result.messages.first?.id
        moreHistory = (info?.messageCount ?? 0) > result.messages.count
        offered = []
        awaitingApproval = []
        followers = [:]
        newestSeen = nil
        callsSeen = [:]
        toolMessages = [:]
        toolMessageOfCall = [:]
        newestTool = nil
        announcedReplaced = []
        compaction = result.compaction
        showHistory(result.messages, newest: result.pending == nil)
        followInFlight(result)
    }

    /// The reply in flight when we attach (its text so far, its calls running or waiting for
    /// a yes), followed from here on.
    func followInFlight(_ result: AttachResult) {
        for tool in result.tools { note(tool) }
        if let pending = result.pending { note(pending) }
        guard let first = result.pending?.id ?? result.tools.first?.id, let reply = ToolLines.head(first),
              let sequence = MessageID.sequence(of: reply), followers[sequence] == nil else { return }
        var follower = ReplyFollower(conversation: conversation, reply: reply)
        // Its turns in the history (shown already) tell the follower the calls it asked for.
        let progress = follower.resume(stored: result.messages, pending: result.pending, tools: result.tools)
        followers[sequence] = follower
        for tool in result.tools where tool.status == .streaming && tool.tool?.approval != .pending {
            transcript.toolInFlight(tool)
        }
        for step in progress { show(step, of: sequence) }
    }

    func whoLine() -> String {
        let names = [myName + " (you)"] + present.values.map(Words.clientName).sorted()
        return "here: " + names.joined(separator: ", ")
    }

    func run() throws(Failure) {
        while true {
            // Everything already read is handled before waiting for more.
            while let event = connection.nextEvent() { try handle(event) }
            transcript.flush()
            if !inputOpen && outstanding.isEmpty { leave() }

            var fds = [BlockingPoll.Watch(fd: connection.fd)]
            let inputIndex = fds.count
            if inputOpen { fds.append(BlockingPoll.Watch(fd: 0)) }
            let signalIndex = fds.count
            if let signals { fds.append(BlockingPoll.Watch(fd: signals)) }
            do {
                guard try BlockingPoll.wait(&fds, timeoutMilliseconds: transcript.statusTickMilliseconds) else { continue }
            } catch {
                throw .message("poll failed: \(error)")
            }
            transcript.tick()
            if signals != nil, fds[signalIndex].ready {
                for signal in SignalPipe.drain() { try caught(signal) }
            }
            if fds[0].ready {
                if !(try connection.receive()) {
                    // What came before the end is shown first.
                    while let event = connection.nextEvent() { try handle(event) }
                    try reconnect()
                }
            }
            if inputOpen, fds[inputIndex].ready {
                lastKey = Timestamp.now()
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

    func caught(_ signal: Int32) throws(Failure) {
        switch signal {
        case SIGINT:
            lastKey = Timestamp.now()
            // As in a shell: a half-typed line is cleared and nothing else; on an empty line
            // Ctrl-C stops the reply in flight.
            if let editor, editor.hasTypedText {
                editor.clearLine()
            } else if transcript.replyInFlight || !followers.isEmpty {
                try cancel()
            } else if let editor {
                editor.clearLine()
            } else {
                // What was typed and not yet sent goes; leaving is Ctrl-D or /quit.
                TerminalDevice.discardTypedInput(0)
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

    func cancel() throws(Failure) {
        let id = try connection.send(CancelCall.self, CancelParams(conversation: conversation))
        outstanding[id] = .cancel
    }

    func handle(_ event: Event) throws(Failure) {
        switch event {
        case .notification(let told):
            try notification(told)
        case .response(let id, let result):
            guard let pending = outstanding.removeValue(forKey: id) else { return }
            switch (pending, result) {
            case (.send, .failure(let error)): transcript.error("not sent: \(error.message)")
            case (.cancel, .success(let value)) where CancelResult(json: value).cancelled == nil:
                followers = [:]
                transcript.notice("nothing to cancel")
            case (.approve(let waiting), .failure(let error)) where error.code == RPCError.conflict:
                // Somebody answered first, or the call ended: not ours to worry about.
                transcript.notice(error.message.contains(waiting.call.id) ? error.message : "call \(waiting.call.id): \(error.message)")
            case (.approve(let waiting), .failure(let error)):
                if !awaitingApproval.contains(where: { $0.call.id == waiting.call.id }) { awaitingApproval.insert(waiting, at: 0) }
                transcript.error(error.message)
            case (.fork, .success(let value)):
                let forked = try? ForkResult(decoding: value)
                let made = forked?.conversation.id ?? "?"
                transcript.notice("forked as \(made): /switch \(made) to go there" + (forked?.reply != nil ? " (its last question is being answered)" : ""))
            case (.share, .success(let value)) where (try? UnshareResult(decoding: value))?.unshared == false:
                transcript.notice("it was not shared with that user")
            case (.share, .success(let value)) where (try? ShareResult(decoding: value))?.allowed == false:
                transcript.notice("that user is not in confabd's access.allow_uids: they cannot connect until added there and confabd is reloaded")
            case (.restartServer, .success(let value)):
                if let server = MCPRestartResult(json: value).server {
                    let line = "MCP " + ToolsTable.serverLine(server)
                    if server.state == .ready { transcript.notice(line) } else { transcript.error(line) }
                }
            case (_, .failure(let error)): transcript.error(error.message)
            default: break
            }
            // After the refusal, if any: then that its files are still attached.
            settleFiles(of: id, result)
        case .fatal(let error):
            transcript.breakLine()
            throw .rpc(error)
        }
    }

    func notification(_ notification: ServerNotification) throws(Failure) {
        guard case .conversation(let id, let event) = notification else {
            if case .serverStopping(let reason) = notification { stoppingReason = reason ?? "no reason given" }
            return
        }
        // Everything else is about one conversation; we follow only ours.
        guard id == conversation else { return }
        noteMessages(of: event)
        // How far a running call is: its line on the status row, nothing in the transcript.
        if case .toolProgress(let progress) = event { return transcript.toolProgress(progress) }
        if compactionEvent(event) { return }
        // A reply's own events go to its follower, which says what to show.
        if let sequence = follow(event) {
            for step in followers[sequence]?.take(event) ?? [] { show(step, of: sequence) }
            return
        }
        switch event {
        case .messageCreated(let message):
            if message.role == .tool {
                // A call is followed through tool.started and tool.completed.
                if message.status != .streaming { toolEnded(message) }
                return
            }
            // What was offered answered the message before this one.
            offered = []
            // Printed once a reply streaming now has ended its turn, as it is answered after it.
            transcript.whenFree("message from " + (message.author?.clientID == myClientID ? "you" : Words.authorName(message))) { [transcript] in
                transcript.message(message)
            }
        case .messageSuperseded(let message, let by):
            // A reply's whole chain (its results and later turns) is replaced with it: said
            // once, of the reply's first message.
            let id = ToolLines.head(message) ?? message
            let newer = ToolLines.head(by) ?? by
            guard !announcedReplaced.contains(id) else { return }
            announcedReplaced.insert(id)
            switch roles[id] ?? roles[message] {
            case .user?:
                editedAs.insert(newer)
                transcript.news("\(id) was edited: \(newer) takes its place")
            case .assistant? where editedAs.contains(newer):
                transcript.news("the reply \(id) is left out: its question was edited")
            case .assistant?:
                transcript.news("the reply \(id) is replaced by \(newer) (/versions lists earlier replies)")
            default:
                transcript.news("\(id) is replaced by \(newer)")
            }
        case .messageCompleted(let message), .toolCompleted(let message):
            // A message of no reply followed here (a late announcement): shown as it is stored.
            if message.role == .tool { toolEnded(message) } else { transcript.replyEnded(message, error: nil) }
        case .messageFailed(let message, let error):
            if message.role == .tool { toolEnded(message) } else { transcript.replyEnded(message, error: Words.replyError(error ?? message.error)) }
        case .toolApproved(let call, let by), .toolDenied(let call, let by):
            // A call of no reply followed here.
            let verb = (event.kind == .toolApproved ? ToolApprovalState.approved : .denied).rawValue
            awaitingApproval.removeAll { $0.call.id == call }
            transcript.toolAnswered(call: call)
            transcript.news("call \(call) \(verb)" + (by.map { " by " + name(of: $0) } ?? ": nobody answered in time"))
        case .conversationUpdated(let info, let changer):
            // Who changed the settings, said beside each change as cancels and approvals say it.
            let by = changer.map { " (by \(name(of: $0)))" } ?? ""
            let newTitle = info.title
            let newModel: String? = info.model
            let newSystem = info.system
            let newProfile = info.profile
            let newParams: String? = info.params.json.text
            let newSharing = SharedUser.list(info.sharedWith)
            if newSharing != sharing { transcript.news(newSharing.map { "shared with \($0)" } ?? "shared with nobody") }
            let configured = newModel != model || newSystem != system || newProfile != profile || newParams != sampling || newSharing != sharing
            sharing = newSharing
            sharedRole = info.roleOfThisUser
            if newProfile != profile { transcript.news("profile: \(newProfile ?? "none")" + by) }
            if newModel != model { transcript.news("model: \(newModel ?? "?")" + by) }
            if newSystem != system { transcript.news((newSystem.map { "system prompt: \($0)" } ?? "system prompt cleared") + by) }
            // A rename says its title even when unchanged: it was asked for.
            if newTitle != title || !configured { transcript.news("title: \(newTitle)") }
            title = newTitle
            model = newModel
            system = newSystem
            profile = newProfile
            if newParams != sampling { transcript.news("parameters: \(newParams ?? "{}")" + by) }
            sampling = newParams
            editor?.setPrompt(prompt)
        case .conversationDeleted:
            transcript.notice("the conversation was deleted")
            throw .exit(0)
        case .conversationUnshared:
            transcript.notice("the owner stopped sharing this conversation with you")
            throw .exit(0)
        case .clientAttached(let client):
            present[client.id] = client
            transcript.news("\(Words.clientName(client)) joined")
        case .clientDetached(let client):
            present[client.id] = nil
            transcript.news("\(Words.clientName(client)) left")
        default:
            return
        }
    }

    /// `you` for ourselves, else the client's name.
    func name(of client: ClientInfo) -> String { client.id == myClientID ? "you" : Words.clientName(client) }

    /// The reply whose follower takes `event`, started for a reply that begins (or goes on)
    /// here; nil for what no reply in flight is concerned with.
    func follow(_ event: ConversationEvent) -> Int? {
        switch event {
        case .messageCreated(let message) where message.role == .assistant && message.status == .streaming,
             .messageContinued(let message):
            guard let reply = ToolLines.head(message.id), let sequence = MessageID.sequence(of: reply) else { return nil }
            // A continued reply is followed afresh: its first follower saw it end.
            var fresh = followers[sequence] == nil
            if case .messageContinued = event { fresh = true }
            if fresh { followers[sequence] = ReplyFollower(conversation: conversation, reply: reply) }
            return sequence
        case .messageDelta, .messageReasoning, .messageRetrying, .toolStarted, .toolApprovalRequested(_?, _):
            // A reply in flight that we did not see start is followed from here.
            guard let id = event.messageID, let reply = ToolLines.head(id), let sequence = MessageID.sequence(of: reply) else { return nil }
            if followers[sequence] == nil { followers[sequence] = ReplyFollower(conversation: conversation, reply: reply) }
            return sequence
        case .toolApproved(let call, _), .toolDenied(let call, _):
            return followers.first { $0.value.calls[call] != nil }?.key
        default:
            guard let sequence = ToolLines.sequence(event.messageID), followers[sequence] != nil else { return nil }
            return sequence
        }
    }

    /// Shows one step of reply `sequence`, as its follower reported it.
    func show(_ progress: ReplyProgress, of sequence: Int) {
        switch progress {
        case .turnStarted(_, let message):
            offered = []
            // Without its message, its text starts it on the screen.
            if let message { transcript.replyStarted(message) }
        case .continued(let message):
            transcript.replyContinued(message)
        case .text(let turn, let piece):
            transcript.delta(id: turn, piece)
        case .reasoning(let turn, _, let thought):
            transcript.thinking(id: turn, thought: thought)
        case .reasoningEnded(let turn, _):
            transcript.thoughtEnded(id: turn)
        case .retrying(let attempt, let delay, let error):
            if let turn = followers[sequence]?.turn {
                // One short line: the server's own text is in the message's error and confabd's log.
                transcript.retrying(id: turn, attempt: attempt, reason: Words.replyError(error, detailed: false), milliseconds: delay)
            }
        case .cancelled(let by):
            if let reply = followers[sequence]?.reply { transcript.cancelled(id: reply, by: by.map(name(of:)) ?? "someone") }
        case .turnEnded(let message):
            transcript.replyEnded(message, error: message.status == .failed ? Words.replyError(message.error) : nil)
        case .toolsRequested:
            break
        case .approvalRequested(let call):
            callsSeen[call.id] = call
            let asked = awaitingApproval.contains { $0.call.id == call.id }
            askApproval(Waiting(call: call))
            if !asked, sharedRole == nil { notifyApproval(call) }
        case .approvalDecided(let call, let allowed, let by):
            awaitingApproval.removeAll { $0.call.id == call.id }
            transcript.toolAnswered(call: call.id)
            transcript.news("call \(call.id) \((allowed ? ToolApprovalState.approved : .denied).rawValue)" + (by.map { " by " + name(of: $0) } ?? ": nobody answered in time"))
        case .toolStarted(let call):
            callsSeen[call.id] = call
            awaitingApproval.removeAll { $0.call.id == call.id }
            transcript.toolStarted(call: call.id, name: call.name)
        case .toolEnded(let message, _):
            toolEnded(message)
        case .finished(let end):
            notifyReplyEnded(end)
            let calls = followers[sequence]?.calls ?? [:]
            awaitingApproval.removeAll { calls[$0.call.id] != nil }
            followers[sequence] = nil
        }
    }

    /// Remembers the messages an event carries, for /tool, /approve and after a reconnection.
    func noteMessages(of event: ConversationEvent) {
        switch event {
        case .messageCreated(let message), .messageCompleted(let message), .messageContinued(let message),
             .toolCompleted(let message), .messageFailed(let message, _):
            note(message)
        case .toolStarted(let message, let call):
            note(message)
            callsSeen[call.id] = call
        case .toolApprovalRequested(let message, let call):
            if let message { note(message) }
            callsSeen[call.id] = callsSeen[call.id] ?? call
        default:
            break
        }
    }

    /// confabd said it is stopping: the end of the connection that follows is expected.
    var stoppingReason: String?

    // MARK: Input

    func readInput() throws(Failure) {
        var chunk = [UInt8](repeating: 0, count: 1 << 14)
        let count: Int
        do {
            count = try chunk.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Files.read(0, into: raw) }
        } catch let error as Errno where error.code == EAGAIN {
            return
        } catch {
            count = -1
        }
        if count < 0 {
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

    func typed(_ bytes: [UInt8]) throws(Failure) {
        var bytes = bytes
        if bytes.last == 0x0D { bytes.removeLast() }
        var text = String(decoding: bytes, as: UTF8.self)
        // A paste that ended with a line break does not send it.
        while text.hasSuffix("\n") { text.removeLast() }
        if text.isBlank { return }
        // While a call waits for a yes, `y` or `n` alone answers it; anything longer is a message.
        if !awaitingApproval.isEmpty, sharedRole == nil, let allow = Self.yesOrNo(text) {
            try answer(allow: allow, call: nil)
            return
        }
        // The number alone picks a quick reply, as /N does, but only while some are offered:
        // otherwise a number is a message like any other.
        if !offered.isEmpty, let number = Int(text.trimmingWhitespace), (1...offered.count).contains(number) {
            try send(offered[number - 1])
        } else if text.hasPrefix("//") {
            try send(String(text.dropFirst()))
        } else if text.hasPrefix("/") {
            try command(text)
        } else {
            try send(text)
        }
    }

    func send(_ text: String) throws(Failure) {
        var params = SendParams(conversation: conversation, content: text)
        // The files pending go with it, uploaded now; a refusal keeps them pending and the text unsent.
        switch try uploadPendingFiles() {
        case .refused: return
        case .uploaded(let attachments): params.attachments = attachments
        case .nothing: break
        }
        // Not printed here: the daemon echoes it back as message.created.
        let id = try connection.send(SendCall.self, params)
        outstanding[id] = .send
        if !pendingFiles.isEmpty {
            filesInFlight[id] = pendingFiles
            pendingFiles = []
        }
    }

}
