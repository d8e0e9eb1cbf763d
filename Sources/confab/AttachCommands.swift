#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import LineEditor
import Posix
import Terminal

/// One slash command, as tmux's `cmd_entry` is one: its names, the usage and words `/help`
/// shows, and what it does with the rest of the line. `AttachSession.slashCommands` is the one
/// place a command is added: `/help`, Tab and dispatch all read it.
struct SlashCommand: Sendable {
    /// The names it answers to; the first is the one `/help` and Tab show. None: a line of
    /// `/help` only (`/N`, `//text`), handled before the table is asked.
    let names: [String]
    /// `/history [N]`.
    let usage: String
    /// What it does; a second line, when given, goes under it (an option of the command).
    let help: [String]
    let run: @Sendable (AttachSession, _ name: String, _ argument: String) throws(Failure) -> Void

    init(_ names: [String], _ usage: String, _ help: String..., run: @escaping @Sendable (AttachSession, _ name: String, _ argument: String) throws(Failure) -> Void) {
        self.names = names
        self.usage = usage
        self.help = help
        self.run = run
    }

    /// A line of `/help` with no command of its own behind it.
    static func helpOnly(_ usage: String, _ help: String) -> SlashCommand {
        SlashCommand([], usage, help) { _, _, _ throws(Failure) in }
    }

    /// Its lines of `/help`: the usage, then the words from the 18th column.
    var helpLines: [String] {
        let padded = usage + String(repeating: " ", count: max(1, 17 - usage.count))
        return [padded + (help.first ?? "")] + help.dropFirst()
    }
}

/// The slash commands typed on the input line.
extension AttachSession {
    static let slashCommands: [SlashCommand] = [
        SlashCommand(["help"], "/help", "this list") { session, _, _ throws(Failure) in session.transcript.block(AttachSession.help) },
        SlashCommand(["cancel"], "/cancel", "stop the reply in flight (Ctrl-C on an empty line does too)") { session, _, _ throws(Failure) in try session.cancel() },
        SlashCommand(["history"], "/history [N]", "show N (default 20) earlier messages") { session, _, argument throws(Failure) in try session.historyCommand(argument) },
        SlashCommand(["who"], "/who", "who is attached") { session, _, _ throws(Failure) in session.transcript.notice(session.whoLine()) },
        SlashCommand(["rename"], "/rename TITLE", "retitle the conversation") { session, _, argument throws(Failure) in try session.renameCommand(argument) },
        SlashCommand(["model"], "/model NAME", "ask the next replies of the model NAME",
                     "  [--reasoning-effort LEVEL]  and how hard it thinks (low, medium, high, …)") { session, _, argument throws(Failure) in
            try session.modelCommand(argument)
        },
        SlashCommand(["system"], "/system [TEXT]", "the system prompt for the next replies (nothing clears it)") { session, _, argument throws(Failure) in
            var params = ConfigureParams()
            (params.conversation, params.system) = (session.conversation, argument)
            session.outstanding[try session.connection.send(ConfigureCall.self, params)] = .configure
        },
        SlashCommand(["switch"], "/switch ID", "attach to another conversation instead (Tab completes ids and titles)") { session, _, argument throws(Failure) in
            try session.switchCommand(argument)
        },
        SlashCommand(["new"], "/new [TITLE]", "start a conversation and switch to it") { session, _, argument throws(Failure) in
            let made = try createConversation(session.connection, title: argument.isEmpty ? nil : argument, system: nil, model: nil)
            try session.switchTo(made.id)
        },
        SlashCommand(["edit"], "/edit", "write a message in $EDITOR, then send it") { session, _, _ throws(Failure) in try session.edit() },
        SlashCommand(["retry"], "/retry", "a new reply to the last message (the old one is kept)") { session, _, _ throws(Failure) in
            session.outstanding[try session.connection.send(RegenerateCall.self, ConversationTarget(conversation: session.conversation))] = .revision
        },
        SlashCommand(["versions"], "/versions [ID]", "earlier versions of the last reply (or of reply ID)") { session, _, argument throws(Failure) in
            try session.versions(of: argument.isEmpty ? nil : argument)
        },
        SlashCommand(["edit-last"], "/edit-last", "change your last message in $EDITOR and get a new reply") { session, _, _ throws(Failure) in try session.editLast() },
        SlashCommand(["continue"], "/continue", "continue a reply cut off at the model's length limit") { session, _, _ throws(Failure) in
            session.outstanding[try session.connection.send(ContinueCall.self, ConversationTarget(conversation: session.conversation))] = .revision
        },
        SlashCommand(["fork"], "/fork [MSG]", "copy the conversation (up to message MSG) into a new one") { session, _, argument throws(Failure) in
            try session.forkCommand(argument)
        },
        SlashCommand(["compact"], "/compact [FOCUS]", "summarise the conversation so far: replies are sent the summary instead") { session, name, argument throws(Failure) in
            try session.compactCommand(name, argument)
        },
        SlashCommand(["summary"], "/summary", "print the summary in force") { session, name, argument throws(Failure) in
            try session.compactCommand(name, argument)
        },
        SlashCommand(["uncompact"], "/uncompact", "undo the summary: replies are sent every message again") { session, name, argument throws(Failure) in
            try session.compactCommand(name, argument)
        },
        SlashCommand(["thinking"], "/thinking [ID]", "the thought of the reply in flight (or of reply ID, such as m4)") { session, _, argument throws(Failure) in
            try session.showThought(argument.isEmpty ? nil : argument)
        },
        SlashCommand(["tool"], "/tool [ID]", "all a tool answered (ID: a call id or a message id such as m2.1; default the latest)") { session, _, argument throws(Failure) in
            try session.showTool(argument.isEmpty ? nil : argument)
        },
        SlashCommand(["tools"], "/tools", "the tools models can call and their MCP servers (/tools --restart SERVER starts one again)") { session, _, argument throws(Failure) in
            try session.tools(argument)
        },
        SlashCommand(["share"], "/share USER", "share it with USER, a login or uid (--read-only: to only read)") { session, name, argument throws(Failure) in
            try session.shareCommand(name, argument)
        },
        SlashCommand(["unshare"], "/unshare USER", "stop sharing it with USER (their clients are detached)") { session, name, argument throws(Failure) in
            try session.shareCommand(name, argument)
        },
        SlashCommand(["approve"], "/approve [CALL]", "let a tool call that waits for approval run (default the oldest; y alone does too)") { session, _, argument throws(Failure) in
            try session.answer(allow: true, call: argument.isEmpty ? nil : argument)
        },
        SlashCommand(["deny"], "/deny [CALL]", "refuse it (n alone on a line does too)") { session, _, argument throws(Failure) in
            try session.answer(allow: false, call: argument.isEmpty ? nil : argument)
        },
        SlashCommand(["attach"], "/attach [PATH]", "send files with the next message (several paths; one with spaces in quotes; Tab completes); alone: list them") { session, _, argument throws(Failure) in
            session.attachFiles(argument)
        },
        SlashCommand(["detach"], "/detach", "drop the files attached") { session, _, _ throws(Failure) in session.detachFiles() },
        .helpOnly("/N", "send quick reply N (the number alone on a line does too)"),
        SlashCommand(["quit", "exit"], "/quit", "detach and leave (Ctrl-D does too)") { session, _, _ throws(Failure) in session.leave() },
        .helpOnly("//text", "send a line that starts with a slash"),
    ]

    static let help = slashCommands.flatMap(\.helpLines).joined(separator: "\n")

    /// Each name to its command.
    static let commandsByName: [String: SlashCommand] = Dictionary(
        slashCommands.flatMap { command in command.names.map { ($0, command) } }, uniquingKeysWith: { first, _ in first })

    func command(_ line: String) throws(Failure) {
        let words = line.dropFirst().split(separator: " ", maxSplits: 1).map(String.init)
        let name = words.first ?? ""
        let argument = words.count > 1 ? words[1].trimmingWhitespace : ""
        if let command = Self.commandsByName[name] {
            return try command.run(self, name, argument)
        }
        if let number = Int(name), argument.isEmpty {
            return try quickReply(number)
        }
        transcript.error("unknown command /\(name) (/help lists them; // sends a line starting with a slash)")
    }

    /// `/N`: quick reply N of those the last reply offered.
    private func quickReply(_ number: Int) throws(Failure) {
        guard (1...max(1, offered.count)).contains(number), !offered.isEmpty else {
            transcript.error(offered.isEmpty ? "no quick replies are offered" : "/\(number): the quick replies are /1 to /\(offered.count)")
            return
        }
        try send(offered[number - 1])
    }

    func historyCommand(_ argument: String) throws(Failure) {
        let count = argument.isEmpty ? 20 : Int(argument) ?? -1
        guard (1...1000).contains(count) else {
            transcript.error("/history takes a number of messages, 1 to 1000")
            return
        }
        try earlier(count)
    }

    func renameCommand(_ argument: String) throws(Failure) {
        guard !argument.isEmpty else {
            transcript.error("/rename needs a title")
            return
        }
        var params = RenameParams()
        (params.conversation, params.title) = (conversation, argument)
        outstanding[try connection.send(RenameCall.self, params)] = .rename
    }

    /// `/model NAME`, `/model NAME --reasoning-effort LEVEL`, `/model --reasoning-effort LEVEL`.
    func modelCommand(_ argument: String) throws(Failure) {
        var words = argument.split(whereSeparator: \.isWhitespace).map(String.init)
        var effort: String?
        if let flag = words.firstIndex(of: "--reasoning-effort") {
            guard flag + 1 < words.count, SamplingParameters.isEffortLevel(words[flag + 1]) else {
                transcript.error("/model --reasoning-effort needs a level such as low, medium or high")
                return
            }
            effort = words[flag + 1]
            words.removeSubrange(flag...(flag + 1))
        }
        guard words.count <= 1, !(words.isEmpty && effort == nil) else {
            transcript.error("/model needs a model name (confab models lists them), and may add --reasoning-effort LEVEL")
            return
        }
        var params = ConfigureParams()
        (params.conversation, params.model) = (conversation, words.first)
        if let effort { params.params = SamplingParameters(reasoningEffort: effort) }
        outstanding[try connection.send(ConfigureCall.self, params)] = .configure
    }

    func switchCommand(_ argument: String) throws(Failure) {
        guard !argument.isEmpty else {
            transcript.error("/switch needs a conversation id")
            return
        }
        do throws(Failure) {
            try switchTo(try connection.resolveConversation(argument))
        } catch {
            if case .message(let text) = error { transcript.error(text) } else { throw error }
        }
    }

    func forkCommand(_ argument: String) throws(Failure) {
        if !argument.isEmpty, MessageID.sequence(of: argument) == nil {
            transcript.error("/fork takes a message id such as m4 (confab show lists them), or nothing for all")
            return
        }
        outstanding[try connection.send(ForkCall.self, ForkParams(conversation: conversation, at: argument.isEmpty ? nil : argument))] = .fork
    }

    /// `/share USER [--read-only]` and `/unshare USER`.
    func shareCommand(_ name: String, _ argument: String) throws(Failure) {
        var words = argument.split(separator: " ").map(String.init)
        let readOnly = name == "share" && words.contains("--read-only")
        words.removeAll { $0 == "--read-only" && name == "share" }
        guard words.count == 1 else {
            transcript.error(name == "share" ? "/share needs a user (a login or uid), and --read-only if they should only read" : "/unshare needs a user (a login or uid)")
            return
        }
        let user = SharedUser.named(words[0])
        outstanding[try name == "share"
            ? connection.send(ShareCall.self, ShareParams(conversation: conversation, uid: user.uid, login: user.login, role: readOnly ? .read : .write))
            : connection.send(UnshareCall.self, UnshareParams(conversation: conversation, uid: user.uid, login: user.login))] = .share
    }

    /// /thinking: the thought of the reply in flight, or of reply `given` (`m4`, its later turns
    /// `m4.2` too), printed once as a dim block; the status row folds it meanwhile.
    func showThought(_ given: String?) throws(Failure) {
        guard let given else {
            let inFlight = followers.values.sorted { $0.reply < $1.reply }.compactMap { follower -> (String, Reasoning)? in
                follower.thoughts[follower.turn].map { (follower.turn, $0) }
            }
            guard let (turn, thought) = inFlight.last else {
                transcript.notice(followers.isEmpty ? "no reply in flight: /thinking ID shows the thought of reply ID"
                                                    : "the reply in flight has no thought (yet)")
                return
            }
            let now = Timestamp.now()
            let state = thought.ended == nil ? "thinking for \(thought.seconds(now: now)) s" : "thought for \(thought.seconds(now: now)) s"
            transcript.thought(thought.text, header: "\(turn): \(state)")
            return
        }
        guard let head = ToolLines.head(given), MessageID.sequence(of: given) != nil else {
            transcript.error("/thinking takes a reply's id, such as m4 (confab show lists them), or nothing for the reply in flight")
            return
        }
        let messages = try wholeMessages(connection, conversation)
        // The reply's turns, each with its own thought; `m4.2` names that turn alone.
        let turns = messages.filter { $0.role == .assistant && ($0.id == given || (given == head && ToolLines.head($0.id) == head)) }
        guard !turns.isEmpty else {
            transcript.error("/thinking: no reply \(given) in this conversation")
            return
        }
        let thoughts = turns.compactMap { turn in (turn.reasoning ?? followers.values.first { $0.owns(turn.id) }?.thoughts[turn.id]).map { (turn.id, $0) } }
        guard !thoughts.isEmpty else {
            transcript.notice("\(given) has no thought: the model wrote no reasoning for it")
            return
        }
        let now = Timestamp.now()
        for (id, thought) in thoughts {
            let redacted = thought.redactedBlocks > 0 ? " (and \(Words.count(thought.redactedBlocks, "encrypted block")))" : ""
            transcript.thought(thought.text, header: "\(id): \(thought.ended == nil ? "thinking" : "thought") for \(thought.seconds(now: now)) s" + redacted)
        }
    }

    func earlier(_ count: Int) throws(Failure) {
        guard moreHistory, let before = oldestShown else {
            transcript.notice("nothing earlier")
            return
        }
        let page = try connection.call(HistoryCall.self, HistoryParams(conversation: conversation, before: before, limit: count))
        let messages = page.messages
        moreHistory = page.more
        if let first = messages.first?.id { oldestShown = first }
        transcript.notice("\(Words.count(messages.count, "earlier message"))" + (moreHistory ? " (more with /history)" : ""))
        showHistory(messages)
        transcript.notice("back to now")
    }

    func switchTo(_ id: String) throws(Failure) {
        guard id != conversation else { return }
        _ = try connection.call(DetachCall.self, ConversationTarget(conversation: conversation))
        transcript.reset()
        try attach(id, history: 20)
    }

    /// Stored messages, the way the conversation reads now: a message replaced by a newer one
    /// (a regenerated reply with its tool calls and later turns, an edited message) is left
    /// out, and a reply with earlier versions says so once it is shown whole.
    func showHistory(_ messages: [Message], newest: Bool = false) {
        for message in messages { note(message) }
        func head(_ message: Message) -> String { ToolLines.head(message.id) ?? "" }
        let replaced = Set(messages.compactMap { $0.supersededBy.flatMap(ToolLines.head) })
        // A reply replaced is replaced whole, whether or not each of its steps says so.
        let replacedReplies = Set(messages.filter { $0.supersededBy != nil && !ToolLines.isStep($0.id) }.map(head))
        let shown = messages.filter { $0.supersededBy == nil && !(ToolLines.isStep($0.id) && replacedReplies.contains(head($0))) }
        let summaryAfter = compaction.flatMap { MessageID.order(of: $0.last) }
        if let summaryAfter, let compaction, let first = shown.first, first.order > summaryAfter { transcript.rule(compaction.line) }
        for (index, message) in shown.enumerated() {
            transcript.message(message)
            if let compaction, message.id == compaction.last { transcript.rule(compaction.line) }
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
    func note(_ message: Message) {
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
    func versions(of given: String?) throws(Failure) {
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

    /// /tools: the listing `confab tools` prints; /tools --restart SERVER restarts a server,
    /// shown once it is ready or has failed (the screen goes on meanwhile).
    func tools(_ argument: String) throws(Failure) {
        let words = argument.split(separator: " ").map(String.init)
        if words.first == "--restart" {
            guard words.count == 2 else {
                transcript.error("/tools --restart needs the name of one MCP server (/tools lists them)")
                return
            }
            outstanding[try connection.send(MCPRestartCall.self, MCPRestartParams(server: words[1]))] = .restartServer
            transcript.notice("restarting MCP server \(words[1])…")
            return
        }
        guard words.isEmpty else {
            transcript.error("/tools takes nothing, or --restart SERVER")
            return
        }
        let listing = ToolsListResult(json: try connection.call(.toolsList))
        guard !listing.tools.isEmpty || !listing.servers.isEmpty else {
            transcript.notice("no tools: confabd's config has no [tools.NAME] or [mcp.NAME] tables")
            return
        }
        let text = ToolsTable.text(listing, width: nil)
        transcript.block(text.hasSuffix("\n") ? String(text.dropLast()) : text)
    }
}
