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
        let me = HelloResult(json: try connection.hello(command: "attach", name: name))
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
    private var connection: Connection
    private let socketPath: String
    /// The display name asked for (`--name`), given again when we reconnect.
    private let requestedName: String?
    private var conversation = ""
    private let transcript: Transcript
    private var myClientID: String
    private let myName: String
    /// Others attached, by client id.
    private var present: [String: ClientInfo] = [:]
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
    /// Who else may see the conversation, as the notices say it (`bob (write), carol (read)`).
    private var sharing: String?
    /// Roles of the messages seen here, and the messages that replaced an edited one.
    private var roles: [String: Role] = [:]
    private var editedAs: Set<String> = []
    /// The quick replies under the newest message, which `/1`, `/2`… send.
    private var offered: [String] = []
    /// Tool calls waiting for somebody's yes, oldest first: `y`, `n`, /approve and /deny answer the first.
    private var awaitingApproval: [Waiting] = []
    /// The replies in flight, by sequence number, each followed from its start (or from
    /// when we attached) to its chain's end: a reply running tools is in flight for Ctrl-C
    /// too, though no text streams.
    private var followers: [Int: ReplyFollower] = [:]
    /// The newest message seen here: after a reconnection, what is newer was missed.
    private var newestSeen: MessageOrder?
    /// Every call seen (in `tool_calls`, `tool.started`, `tool.approval_requested`), by call id.
    private var callsSeen: [String: ToolCall] = [:]
    /// Tool messages seen, by id, and which answers which call, for /tool.
    private var toolMessages: [String: Message] = [:]
    private var toolMessageOfCall: [String: String] = [:]
    private var newestTool: String?
    /// Replies whose replacement was said already: a whole chain is replaced at once.
    private var announcedReplaced: Set<String> = []

    private struct Waiting {
        var call: ToolCall
    }

    private enum Pending {
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
        let screen = ChatScreen()
        self.screen = screen
        transcript.screen = screen
    }

    func startEditor() {
        editor = LineEditor(prompt: prompt, historyFile: Self.historyFile(), completer: completer)
    }

    /// Tab in the input line (`AttachChoice.swift`); the conversations are asked for at each press.
    private var completer: LineEditor.Completer {
        { [weak self] line in
            guard let self else { return [] }
            return self.completions(of: line) {
                (try? self.connection.call(.conversationList, ["limit": 200]))?["conversations"]?.array ?? []
            }
        }
    }

    /// One conversation Tab could complete to, listed above the input line.
    func listCompletion(_ id: String, title: String) {
        transcript.notice(id + "  " + title)
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
        let result = AttachResult(json: try connection.call(.conversationAttach, ["conversation": .string(id), "history": .int(history)]))
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
        showHistory(result.messages, newest: result.pending == nil)
        followInFlight(result)
    }

    /// The reply in flight when we attach (its text so far, its calls running or waiting for
    /// a yes), followed from here on.
    private func followInFlight(_ result: AttachResult) {
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

    private func whoLine() -> String {
        let names = [myName + " (you)"] + present.values.map(Words.clientName).sorted()
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
                    // What came before the end is shown first.
                    while let event = connection.nextEvent() { try handle(event) }
                    try reconnect()
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
        let id = try connection.send(.generationCancel, ["conversation": .string(conversation)])
        outstanding[id] = .cancel
    }

    private func handle(_ event: Event) throws(Failure) {
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
                let made = value["conversation"]?["id"]?.string ?? "?"
                transcript.notice("forked as \(made): /switch \(made) to go there" + (value["reply"] != nil ? " (its last question is being answered)" : ""))
            case (.share, .success(let value)) where value["unshared"]?.bool == false:
                transcript.notice("it was not shared with that user")
            case (.share, .success(let value)) where value["allowed"]?.bool == false:
                transcript.notice("that user is not in confabd's access.allow_uids: they cannot connect until added there and confabd is reloaded")
            case (_, .failure(let error)): transcript.error(error.message)
            default: break
            }
        case .fatal(let error):
            transcript.breakLine()
            throw .rpc(error)
        }
    }

    private func notification(_ notification: ServerNotification) throws(Failure) {
        guard case .conversation(let id, let event) = notification else {
            if case .serverStopping(let reason) = notification { stoppingReason = reason ?? "no reason given" }
            return
        }
        // Everything else is about one conversation; we follow only ours.
        guard id == conversation else { return }
        noteMessages(of: event)
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
            transcript.message(message)
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
                transcript.notice("\(id) was edited: \(newer) takes its place")
            case .assistant? where editedAs.contains(newer):
                transcript.notice("the reply \(id) is left out: its question was edited")
            case .assistant?:
                transcript.notice("the reply \(id) is replaced by \(newer) (/versions lists earlier replies)")
            default:
                transcript.notice("\(id) is replaced by \(newer)")
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
            transcript.notice("call \(call) \(verb)" + (by.map { " by " + name(of: $0) } ?? ": nobody answered in time"))
        case .conversationUpdated(let info):
            let newTitle = info.title
            let newModel: String? = info.model
            let newSystem = info.system
            let newProfile = info.profile
            let newParams: String? = info.params.json.text
            let newSharing = SharedUser.list(info.sharedWith)
            if newSharing != sharing { transcript.notice(newSharing.map { "shared with \($0)" } ?? "shared with nobody") }
            let configured = newModel != model || newSystem != system || newProfile != profile || newParams != sampling || newSharing != sharing
            sharing = newSharing
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
        case .conversationDeleted:
            transcript.notice("the conversation was deleted")
            throw .exit(0)
        case .conversationUnshared:
            transcript.notice("the owner stopped sharing this conversation with you")
            throw .exit(0)
        case .clientAttached(let client):
            present[client.id] = client
            transcript.notice("\(Words.clientName(client)) joined")
        case .clientDetached(let client):
            present[client.id] = nil
            transcript.notice("\(Words.clientName(client)) left")
        default:
            return
        }
    }

    /// `you` for ourselves, else the client's name.
    private func name(of client: ClientInfo) -> String { client.id == myClientID ? "you" : Words.clientName(client) }

    /// The reply whose follower takes `event`, started for a reply that begins (or goes on)
    /// here; nil for what no reply in flight is concerned with.
    private func follow(_ event: ConversationEvent) -> Int? {
        switch event {
        case .messageCreated(let message) where message.role == .assistant && message.status == .streaming,
             .messageContinued(let message):
            guard let reply = ToolLines.head(message.id), let sequence = MessageID.sequence(of: reply) else { return nil }
            // A continued reply is followed afresh: its first follower saw it end.
            var fresh = followers[sequence] == nil
            if case .messageContinued = event { fresh = true }
            if fresh { followers[sequence] = ReplyFollower(conversation: conversation, reply: reply) }
            return sequence
        case .messageDelta, .messageRetrying, .toolStarted, .toolApprovalRequested(_?, _):
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
    private func show(_ progress: ReplyProgress, of sequence: Int) {
        switch progress {
        case .turnStarted(_, let message):
            offered = []
            // Without its message, its text starts it on the screen.
            if let message { transcript.replyStarted(message) }
        case .continued(let message):
            transcript.replyContinued(message)
        case .text(let turn, let piece):
            transcript.delta(id: turn, piece)
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
            askApproval(Waiting(call: call))
        case .approvalDecided(let call, let allowed, let by):
            awaitingApproval.removeAll { $0.call.id == call.id }
            transcript.toolAnswered(call: call.id)
            transcript.notice("call \(call.id) \((allowed ? ToolApprovalState.approved : .denied).rawValue)" + (by.map { " by " + name(of: $0) } ?? ": nobody answered in time"))
        case .toolStarted(let call):
            callsSeen[call.id] = call
            awaitingApproval.removeAll { $0.call.id == call.id }
            transcript.toolStarted(call: call.id, name: call.name)
        case .toolEnded(let message, _):
            toolEnded(message)
        case .finished:
            let calls = followers[sequence]?.calls ?? [:]
            awaitingApproval.removeAll { calls[$0.call.id] != nil }
            followers[sequence] = nil
        }
    }

    /// Remembers the messages an event carries, for /tool, /approve and after a reconnection.
    private func noteMessages(of event: ConversationEvent) {
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

    // MARK: Reconnecting

    /// confabd said it is stopping: the end of the connection that follows is expected.
    private var stoppingReason: String?

    /// The connection ended (confabd stopped, restarted or crashed): say so, wait for it to
    /// come back while the person may still leave (Ctrl-D, /quit), then attach again and show
    /// what was missed: the rest of the replies we followed and every message newer than the
    /// newest seen here.
    private func reconnect() throws(Failure) {
        let why = stoppingReason.map { "confabd stopped (\($0))" } ?? "confabd closed the connection"
        stoppingReason = nil
        transcript.notice("\(why); waiting for it to come back (Ctrl-D leaves)")
        // Requests it never answered may or may not have been done: a message says so.
        if outstanding.values.contains(where: { if case .send = $0 { true } else { false } }) {
            transcript.error("a message you sent was not answered before confabd went away: it may not have been stored")
        }
        outstanding = [:]
        awaitingApproval = []
        var waitMilliseconds: Int32 = 100
        while true {
            transcript.flush()
            var fds: [pollfd] = []
            // The line editor still takes keys (Ctrl-D leaves); lines piped in wait in their pipe.
            let watchKeys = inputOpen && editor != nil
            if watchKeys { fds.append(pollfd(fd: 0, events: Int16(POLLIN), revents: 0)) }
            let signalIndex = fds.count
            if let signals { fds.append(pollfd(fd: signals, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), waitMilliseconds)
            if ready < 0 && errno != EINTR { throw .message("poll failed: \(errorText(errno))") }
            if ready > 0 {
                if signals != nil, fds[signalIndex].revents != 0 {
                    for signal in SignalPipe.drain() {
                        if signal == SIGINT { editor?.clearLine() }
                        if signal == SIGWINCH { screen?.resized(); transcript.resized(); editor?.resized() }
                    }
                }
                if watchKeys, fds[0].revents != 0 { readWhileAway() }
            }
            waitMilliseconds = min(1000, waitMilliseconds * 2)
            let fresh: Connection
            do {
                fresh = try Connection.open(path: socketPath)
                let me = HelloResult(json: try fresh.hello(command: "attach", name: requestedName))
                let result = AttachResult(json: try fresh.call(.conversationAttach, ["conversation": .string(conversation), "history": 200]))
                connection = fresh
                myClientID = me.clientID
                caughtUp(result)
                return
            } catch {
                switch error {
                case .unreachable, .disconnected: continue
                case .rpc(let refusal) where refusal.code == RPCError.notFound:
                    transcript.notice("the conversation is gone")
                    throw .exit(0)
                case .rpc(let refusal) where refusal.code == RPCError.shuttingDown: continue
                default: throw error
                }
            }
        }
    }

    /// Keys while confabd is away: lines are not sent (said so), Ctrl-D leaves.
    private func readWhileAway() {
        for input in editor?.readKey() ?? [] {
            switch input {
            case .line: transcript.error("not sent: confabd is not connected yet")
            case .end: leave()
            }
        }
    }

    /// Attached again after a reconnection: what happened while we were away.
    private func caughtUp(_ result: AttachResult) {
        present = [:]
        for client in result.clients { present[client.id] = client }
        let missedAfter = newestSeen
        let followed = Set(followers.keys)
        // Messages newer than any seen here, of no reply we followed.
        let missed = result.messages.filter { message in
            (missedAfter.map { message.order > $0 } ?? true) && !followed.contains(message.sequence)
        }
        transcript.notice("confabd is back" + (missed.isEmpty ? "" : ": \(Words.count(missed.count, "message")) while away"))
        // The replies we followed: the rest of their text and how they ended.
        for sequence in followed.sorted() {
            guard var follower = followers[sequence] else { continue }
            let progress = follower.resume(stored: result.messages, pending: result.pending, tools: result.tools)
            followers[sequence] = follower
            for step in progress { show(step, of: sequence) }
        }
        if !missed.isEmpty { showHistory(missed, newest: result.pending == nil) }
        followInFlight(result)
        for message in result.messages { note(message) }
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
        let id = try connection.send(.messageSend, ["conversation": .string(conversation), "content": .string(text)])
        outstanding[id] = .send
    }

    // MARK: Slash commands

    static let help = """
        /help            this list
        /cancel          stop the reply in flight (Ctrl-C on an empty line does too)
        /history [N]     show N (default 20) earlier messages
        /who             who is attached
        /rename TITLE    retitle the conversation
        /model NAME      ask the next replies of the model NAME
        /system [TEXT]   the system prompt for the next replies (nothing clears it)
        /switch ID       attach to another conversation instead (Tab completes ids and titles)
        /new [TITLE]     start a conversation and switch to it
        /edit            write a message in $EDITOR, then send it
        /retry           a new reply to the last message (the old one is kept)
        /versions [ID]   earlier versions of the last reply (or of reply ID)
        /edit-last       change your last message in $EDITOR and get a new reply
        /continue        continue a reply cut off at the model's length limit
        /fork [MSG]      copy the conversation (up to message MSG) into a new one
        /tool [ID]       all a tool answered (ID: a call id or a message id such as m2.1; default the latest)
        /share USER      share it with USER, a login or uid (--read-only: to only read)
        /unshare USER    stop sharing it with USER (their clients are detached)
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
            let id = try connection.send(.conversationRename, ["conversation": .string(conversation), "title": .string(argument)])
            outstanding[id] = .rename
        case "model":
            guard !argument.isEmpty, !argument.contains(where: \.isWhitespace) else {
                transcript.error("/model needs a model name (confab models lists them)")
                return
            }
            outstanding[try connection.send(.conversationConfigure, ["conversation": .string(conversation), "model": .string(argument)])] = .configure
        case "system":
            outstanding[try connection.send(.conversationConfigure, ["conversation": .string(conversation), "system": .string(argument)])] = .configure
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
            outstanding[try connection.send(.messageRegenerate, ["conversation": .string(conversation)])] = .revision
        case "continue":
            outstanding[try connection.send(.messageContinue, ["conversation": .string(conversation)])] = .revision
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
            outstanding[try connection.send(.conversationFork, .object(params))] = .fork
        case "share", "unshare":
            var words = argument.split(separator: " ").map(String.init)
            let readOnly = name == "share" && words.contains("--read-only")
            words.removeAll { $0 == "--read-only" && name == "share" }
            guard words.count == 1 else {
                transcript.error(name == "share" ? "/share needs a user (a login or uid), and --read-only if they should only read" : "/unshare needs a user (a login or uid)")
                return
            }
            var params = SharedUser.params(words[0])
            params["conversation"] = .string(conversation)
            if name == "share" { params["role"] = .string((readOnly ? ShareRole.read : .write).rawValue) }
            let method = name == "share" ? RPCMethod.conversationShare : .conversationUnshare
            outstanding[try connection.send(method, .object(params))] = .share
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
        let page = try connection.call(.conversationHistory,
                                       ["conversation": .string(conversation), "before": .string(before), "limit": .int(count)])
        let messages = (page["messages"]?.array ?? []).compactMap(Message.init(json:))
        moreHistory = page["more"]?.bool ?? false
        if let first = messages.first?.id { oldestShown = first }
        transcript.notice("\(Words.count(messages.count, "earlier message"))" + (moreHistory ? " (more with /history)" : ""))
        showHistory(messages)
        transcript.notice("back to now")
    }

    private func switchTo(_ id: String) throws(Failure) {
        guard id != conversation else { return }
        _ = try connection.call(.conversationDetach, ["conversation": .string(conversation)])
        transcript.reset()
        try attach(id, history: 20)
    }

    /// Stored messages, the way the conversation reads now: a message replaced by a newer one
    /// (a regenerated reply with its tool calls and later turns, an edited message) is left
    /// out, and a reply with earlier versions says so once it is shown whole.
    private func showHistory(_ messages: [Message], newest: Bool = false) {
        for message in messages { note(message) }
        func head(_ message: Message) -> String { ToolLines.head(message.id) ?? "" }
        let replaced = Set(messages.compactMap { $0.supersededBy.flatMap(ToolLines.head) })
        // A reply replaced is replaced whole, whether or not each of its steps says so.
        let replacedReplies = Set(messages.filter { $0.supersededBy != nil && !ToolLines.isStep($0.id) }.map(head))
        let shown = messages.filter { $0.supersededBy == nil && !(ToolLines.isStep($0.id) && replacedReplies.contains(head($0))) }
        for (index, message) in shown.enumerated() {
            transcript.message(message)
            // Offered only under the newest message: once answered they are history.
            if newest, index == shown.count - 1, let replies = message.quickReplies, !replies.isEmpty {
                offered = replies
                transcript.quickReplies(replies)
            }
            let endsItsReply = index == shown.count - 1 || head(shown[index + 1]) != head(message)
            if endsItsReply, message.role != .user, replaced.contains(head(message)) {
                transcript.notice("an earlier version exists: /versions")
            }
        }
    }

    /// Remembers who wrote a message, to say what a `message.superseded` means, and the tool
    /// calls and results it holds, for /tool and /approve.
    private func note(_ message: Message) {
        let id = message.id
        roles[id] = message.role
        if newestSeen.map({ $0 < message.order }) ?? true { newestSeen = message.order }
        for call in ToolLines.calls(of: message) { callsSeen[call.id] = call }
        guard message.role == .tool else { return }
        toolMessages[id] = message
        if let call = message.tool?.callID { toolMessageOfCall[call] = id }
        if let order = MessageID.order(of: id), newestTool.flatMap(MessageID.order(of:)).map({ $0 < order }) ?? true {
            newestTool = id
        }
    }

    /// /versions: the replies a reply replaced, oldest first, each with its tool calls and
    /// later turns, then which one is current.
    private func versions(of given: String?) throws(Failure) {
        let messages = try wholeMessages(connection, conversation)
        func head(_ id: String?) -> String? { id.flatMap(ToolLines.head) }
        guard let current = head(given ?? messages.last(where: { $0.role == .assistant && $0.supersededBy == nil })?.id) else {
            transcript.notice(given == nil ? "no reply yet" : "/versions takes a reply's id, such as m4")
            return
        }
        var chain: [String] = []
        var newer = current
        while let older = head(messages.last(where: {
            head($0.supersededBy) == newer && $0.role == .assistant && !ToolLines.isStep($0.id)
        })?.id), older != newer, !chain.contains(older) {
            chain.insert(older, at: 0)
            newer = older
        }
        guard !chain.isEmpty else {
            transcript.notice("\(current) has no earlier versions")
            return
        }
        for (number, reply) in chain.enumerated() {
            transcript.notice("version \(number + 1) of \(chain.count + 1) (\(reply))")
            for message in messages where head(message.id) == reply && message.role != .user {
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
        // `y` and `n` answer the oldest; every call can be answered by its id.
        let id = waiting.call.id
        let how = awaitingApproval.count == 1 ? "y/n, or /approve \(id), /deny \(id)" : "/approve \(id) or /deny \(id)"
        transcript.toolApprovalRequested(call: waiting.call.id, name: waiting.call.name, arguments: waiting.call.arguments, how: how)
    }

    /// `tool.approve` for `given` (a call id, or the id of the tool message answering it), or
    /// for the oldest call waiting.
    private func answer(allow: Bool, call given: String?) throws(Failure) {
        var waiting: Waiting
        if let given {
            var callID = given
            if MessageID.order(of: given) != nil {
                guard let known = toolMessages[given]?.tool?.callID else {
                    transcript.error("\(given) is no tool call seen here (give the call's id)")
                    return
                }
                callID = known
            }
            waiting = awaitingApproval.first { $0.call.id == callID }
                ?? Waiting(call: callsSeen[callID] ?? ToolCall(id: callID, name: "?", arguments: ""))
        } else {
            guard let oldest = awaitingApproval.first else {
                transcript.error("no tool call is waiting for approval")
                return
            }
            waiting = oldest
        }
        // Answered as far as we are concerned: `y` again answers the next one.
        awaitingApproval.removeAll { $0.call.id == waiting.call.id }
        let id = try connection.send(.toolApprove, ["conversation": .string(conversation), "call": .string(waiting.call.id),
                                                      "allow": .bool(allow)])
        outstanding[id] = .approve(waiting)
    }

    /// A call ended: its result under it, and it waits for nobody any more.
    private func toolEnded(_ message: Message) {
        if let call = message.tool?.callID { awaitingApproval.removeAll { $0.call.id == call } }
        transcript.toolCompleted(message)
    }

    /// /tool: everything a tool answered; the latest call's without an id.
    private func showTool(_ given: String?) throws(Failure) {
        func matches(_ message: Message) -> Bool {
            guard message.role == .tool else { return false }
            guard let given else { return true }
            return message.id == given || message.tool?.callID == given
        }
        let known = given.map { toolMessages[$0] ?? toolMessageOfCall[$0].flatMap { toolMessages[$0] } } ?? newestTool.flatMap { toolMessages[$0] }
        var found = known
        if found == nil {
            // Older than what this screen has seen: the conversation's history has it.
            found = try wholeMessages(connection, conversation).last(where: matches)
        }
        guard let message = found else {
            transcript.error(given.map { "no tool call \($0) in this conversation (give a call id, or a tool message id such as m2.1)" }
                             ?? "no tool was called in this conversation yet")
            return
        }
        transcript.toolDetail(message, arguments: message.tool.flatMap { callsSeen[$0.callID]?.arguments })
    }

    /// /edit-last: your last message in `$EDITOR`; saved changed, it replaces the message and
    /// the replies to it, and is answered again.
    private func editLast() throws(Failure) {
        let messages = try wholeMessages(connection, conversation)
        guard let last = messages.last(where: { $0.role == .user && $0.supersededBy == nil }) else {
            transcript.notice("no message to edit")
            return
        }
        let id = last.id
        guard let text = composeInEditor(initial: last.content, command: "/edit-last") else { return }
        if text.isBlank || text == last.content {
            transcript.notice("unchanged: nothing sent")
            return
        }
        outstanding[try connection.send(.messageEdit, ["conversation": .string(conversation), "message": .string(id),
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
                self.editor = LineEditor(prompt: prompt, historyFile: Self.historyFile(), completer: completer)
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
        _ = try? connection.call(.conversationDetach, ["conversation": .string(conversation)])
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
