#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Posix
import Terminal

// The commands that look at conversations as a whole: ls, show, export, rm, cancel.

struct List: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List conversations, most recently active first.",
        aliases: ["list"])

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(name: [.customShort("n"), .customLong("limit")], help: "Show at most this many (1 to 10000; default 50).")
    var limit: Int?
    @Flag(help: "Show every conversation.") var all = false
    @Flag(help: "Print the raw conversations array as JSON.") var json = false
    @Flag(name: [.customShort("l"), .customLong("long")],
          help: "Also show each conversation's provider, the tokens its replies used (~ where estimated) and, when any is shared, with whom (:r read only).")
    var long = false

    func validate() throws {
        if let limit, !(1...10000).contains(limit) { throw ValidationError("-n must be between 1 and 10000") }
        if all && limit != nil { throw ValidationError("-n and --all cannot go together") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "ls")
        let shown = all ? 10000 : (limit ?? 50)
        let listing = try connection.send(ListCall.self, ListParams(limit: shown))
        // The count behind "… and N more" is asked for with the listing, not after it.
        let counting = json ? nil : try connection.send(StatusCall.self, NoParams())
        // What each cost, where the config gives prices: only the owner may ask.
        let pricing = long && !json ? try connection.send(UsageCall.self, UsageParams(by: .conversation)) : nil
        let result = try connection.answer(to: listing)
        if json {
            Out.json(result["conversations"] ?? .array([]))
            return
        }
        let conversations = try Connection.read(ListCall.self, result).conversations
        if conversations.isEmpty {
            Out.errorLine("no conversations yet: ask something with `confab ask 'a question'`, or start one with `confab new --title TITLE`")
            return
        }
        var total = conversations.count
        if let counting { total = try connection.answer(StatusCall.self, to: counting).conversations }
        var costs: [String: String]?
        if let pricing, let usage = try? connection.answer(UsageCall.self, to: pricing), usage.total.cost != nil {
            costs = Dictionary(usage.rows.map { ($0.key, UsageCommand.costCell($0)) }, uniquingKeysWith: { a, _ in a })
        }
        Out.stdout(Self.table(conversations, now: Timestamp.now(), width: TerminalSize.of(1)?.columns, long: long, costs: costs))
        if total > conversations.count {
            let more = total - conversations.count
            Out.stdout("… and \(Words.count(more, "more conversation")) (confab ls --all, or -n N)\n")
        }
    }

    /// The listing: a header and one line per conversation, titles cut to `width` columns
    /// (by display width) when writing to a terminal; `long` adds the provider and the tokens.
    /// `costs`, by conversation id, adds a COST column (`-` for one without a priced reply).
    static func table(_ conversations: [ConversationInfo], now: Timestamp, width: Int?, long: Bool = false, costs: [String: String]? = nil) -> String {
        // Who else sees a conversation, in a column of its own once any listed one is shared.
        let sharing = long && conversations.contains { !$0.sharedWith.isEmpty }
        let rows = conversations.map { conversation in
            var cells = [conversation.id,
                         RelativeTime.describe(conversation.updated, now: now),
                         Words.count(conversation.messageCount, "message"),
                         SafeText.singleLine(conversation.model)]
            if long {
                cells.append(SafeText.singleLine(conversation.provider))
                cells.append(tokens(conversation.usage))
                if let costs { cells.append(costs[conversation.id] ?? "-") }
                if sharing { cells.append(SharedUser.cell(conversation.sharedWith)) }
            }
            cells.append(SafeText.singleLine(conversation.title))
            return cells
        }
        let header = long ? ["ID", "UPDATED", "MESSAGES", "MODEL", "PROVIDER", "TOKENS"] + (costs == nil ? [] : ["COST"])
                              + (sharing ? ["SHARED"] : []) + ["TITLE"]
                          : ["ID", "UPDATED", "MESSAGES", "MODEL", "TITLE"]
        let fixed = header.count - 1
        // Counts read best right-aligned; the rest left.
        let rightAligned: Set<Int> = long ? (costs == nil ? [2, 5] : [2, 5, 6]) : [2]
        var widths = header.map { DisplayWidth.of($0) }
        for row in rows {
            for column in 0..<fixed { widths[column] = max(widths[column], DisplayWidth.of(row[column])) }
        }
        let leading = widths[0..<fixed].reduce(0, +) + fixed * 2
        func line(_ cells: [String]) -> String {
            var text = ""
            for column in 0..<fixed {
                let cell = cells[column]
                if rightAligned.contains(column) {
                    text += String(repeating: " ", count: widths[column] - DisplayWidth.of(cell)) + cell + "  "
                } else {
                    text += DisplayWidth.pad(cell, to: widths[column]) + "  "
                }
            }
            let title = width.map { DisplayWidth.truncate(cells[fixed], to: max(8, $0 - leading)) } ?? cells[fixed]
            return text + title + "\n"
        }
        // Appended line by line: joined() on [String] looks up its generic witnesses at run
        // time, which cost more than the whole listing.
        var text = line(header)
        for row in rows { text += line(row) }
        return text
    }

    /// `12,345`, `~800` when any reply's count was estimated, `-` before any reply.
    /// With reasoning or cache counts reported, the whole usage:
    /// `in 2,125 (2,000 cached) · out 300 (200 thinking)`.
    static func tokens(_ usage: Usage) -> String {
        guard usage.totalTokens > 0 else { return "-" }
        if UsageText.hasParts(usage) { return UsageText.line(usage) }
        return (usage.isEstimated ? "~" : "") + UsageText.grouped(usage.totalTokens)
    }
}

/// "just now", "5 min ago", "3 h ago", "yesterday", "4 days ago", then the date.
enum RelativeTime {
    static func describe(_ time: Timestamp, now: Timestamp) -> String {
        let seconds = (now.milliseconds - time.milliseconds) / 1000
        switch seconds {
        case ..<60: return "just now"
        case ..<3600: return "\(seconds / 60) min ago"
        case ..<86400: return "\(seconds / 3600) h ago"
        case ..<(2 * 86400): return "yesterday"
        case ..<(7 * 86400): return "\(seconds / 86400) days ago"
        default: return String(LocalTime.dateAndClock(time).prefix(10))
        }
    }
}

/// Every message of a conversation, fetched page by page from the newest back.
func wholeHistory(_ connection: Connection, _ conversation: String) throws(Failure) -> [JSON] {
    var pages: [[JSON]] = []
    var before: String?
    while true {
        let raw = try connection.call(.conversationHistory, HistoryParams(conversation: conversation, before: before, limit: 1000).json)
        // The messages as they came: `export --format json` writes them as confabd stored them.
        // Only the paging fields are read here: decoding every message of a long conversation
        // just to find the first id was a fifth of an export's time; those who need messages
        // decode them (`wholeMessages`).
        guard let messages = raw["messages"]?.array, let more = raw["more"]?.bool else {
            throw Failure.message("confabd's answer to conversation.history is not a page of messages")
        }
        pages.append(messages)
        guard more, let first = messages.first?["id"]?.string else { break }
        before = first
    }
    return pages.reversed().flatMap { $0 }
}

/// Every message of a conversation as confabd encoded it, asked for as bytes (`sendEncoded`),
/// never parsed into values: `each` makes what is wanted of a page (for `export`, its lines),
/// and the results come back oldest page first. The next page is asked for as soon as a page's
/// first id is known, so `each` runs while confabd reads the next one.
func wholeEncodedHistory<Output>(_ connection: Connection, _ conversation: String,
                                 each: (EncodedHistoryPage) -> Output) throws(Failure) -> [Output] {
    func ask(before: String?) throws(Failure) -> Int {
        try connection.sendEncoded(.conversationHistory, HistoryParams(conversation: conversation, before: before, limit: 1000).json)
    }
    var outputs: [Output] = []
    var asked = try ask(before: nil)
    while true {
        let answer = try connection.answerEncoded(to: asked)
        let page: EncodedHistoryPage
        do throws(EncodedHistoryPage.Failure) {
            page = try EncodedHistoryPage(answer)
        } catch {
            switch error { case .notAPage(let problem): throw .message(problem) }
        }
        let next = page.more ? page.firstID : nil
        if let next { asked = try ask(before: next) }
        outputs.append(each(page))
        guard next != nil else { break }
    }
    return outputs.reversed()
}

/// Every message of a conversation, typed (what cannot be read as a message is left out).
func wholeMessages(_ connection: Connection, _ conversation: String) throws(Failure) -> [Message] {
    try wholeHistory(connection, conversation).compactMap(Message.init(json:))
}

struct Show: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a whole conversation.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Flag(help: "Print each reply's thought (the model's reasoning) under its header; without it, one line says how long it thought.")
    var reasoning = false

    func run() throws {
        let connection = try Connection.start(socketPath, command: "show")
        let conversation = try connection.resolveConversation(id)
        let info = try connection.call(GetCall.self, ConversationTarget(conversation: conversation)).conversation
        let messages = try wholeMessages(connection, conversation)
        // Each reply's cost where the config gives prices (the owner's to ask; others see none).
        let usage = try? connection.call(UsageCall.self, UsageParams(by: .message, conversation: conversation))
        let costs = Dictionary((usage?.rows ?? []).compactMap { row in row.cost.map { (row.key, $0) } }, uniquingKeysWith: { a, _ in a })
        let compaction = try compactionInForce(connection, conversation)
        var out = "\(SafeText.singleLine(info.title)) (\(conversation)) · "
            + Words.count(messages.count, "message")
            + (usage.map { $0.total.cost == nil ? "" : " · cost " + UsageCommand.costCell($0.total) } ?? "") + "\n"
        // Whether it follows the configured default or keeps a model it was given.
        out += "model: \(SafeText.singleLine(info.model))" + (info.modelIsDefault ? " (the default: it follows the config)" : "") + "\n"
        if let shared = SharedUser.list(info.sharedWith) {
            out += "shared with \(shared)\n"
        }
        let width = TerminalSize.of(1)?.columns ?? Int.max / 2
        // A reader may not go on with a reply: its marker does not suggest it.
        let mayContinue = info.roleOfThisUser != .read
        let colour = isatty(1) != 0 && (Environment.get("NO_COLOR") ?? "").isEmpty
        for message in messages {
            out += "\n" + Self.heading(message) + "\n"
            out += Self.thought(message, whole: reasoning, width: width, colour: colour)
            out += Self.body(message, width: width)
            if message.role == .assistant, let usage = message.usage, UsageText.hasParts(usage) { out += UsageText.line(usage) + "\n" }
            if let cost = costs[message.id] { out += "cost \(UsageCommand.cost(cost))\n" }
            if message.role == .assistant, message.status == .complete, message.isCutAtLengthLimit, message.supersededBy == nil {
                out += Transcript.lengthLimitMarker(conversation: conversation, mayContinue: mayContinue) + "\n"
            }
            if let compaction, message.id == compaction.last { out += "\n" + compaction.line + "\n" }
        }
        Out.stdout(out)
    }

    /// A reply's thought, under its header: whole (`--reasoning`: indented, wrapped, dim on a
    /// terminal, made safe), else one line, `[thought for 12 s]`; nothing without one.
    static func thought(_ message: Message, whole: Bool, width: Int, colour: Bool) -> String {
        guard message.role == .assistant, let thought = message.reasoning else { return "" }
        let seconds = thought.seconds(now: thought.ended ?? Timestamp.now())
        let marker = ThoughtText.marker(seconds: seconds, redactedBlocks: thought.redactedBlocks)
        guard whole else { return (colour ? "\u{1B}[2m" + marker + "\u{1B}[0m" : marker) + "\n" }
        let block = ThoughtText.block(thought.text, width: width, colour: colour)
        return (colour ? "\u{1B}[2m" + marker + "\u{1B}[0m" : marker) + "\n" + (block.isEmpty ? "" : block + "\n")
    }

    /// A message's text; a tool's result as its one line (`⚙ weather → 200 · 84 ms · …`), and
    /// the calls a reply asked for, one line each, after its text.
    static func body(_ message: Message, width: Int) -> String {
        if message.role == .tool { return ToolLines.result(message, width: width) + "\n" }
        var out = SafeText.sanitized(message.content)
        if !out.isEmpty, out.last != "\n" { out += "\n" }
        for attachment in message.attachments ?? [] { out += AttachmentText.line(attachment) + "\n" }
        for call in ToolLines.calls(of: message) {
            out += ToolCallFormat.call(name: call.name, arguments: call.arguments, width: width) + "\n"
        }
        return out
    }

    /// `ana · 2026-11-23 14:03 · m3` / `assistant (gpt-4o) · … · m4 · cancelled`, and which message
    /// replaced it for one that was regenerated or edited.
    static func heading(_ message: Message) -> String {
        let time = LocalTime.dateAndClock(message.created)
        var who: String
        switch message.role {
        case .assistant:
            who = Role.assistant.rawValue + (message.model.map { " (\($0))" } ?? "")
        case .tool:
            // How the call went is its line: the heading says only which tool answered.
            who = Role.tool.rawValue + " " + ToolLines.name(of: message)
        case .user, .system:
            who = Words.authorName(message)
        }
        who = SafeText.singleLine(who) + " · " + time
        who += " · " + SafeText.singleLine(message.id)
        if let newer = message.supersededBy { who += " · replaced by " + SafeText.singleLine(newer) }
        if message.role == .tool { return "── " + who }
        switch message.status {
        case .complete: break
        case .failed: who += " · failed: " + Words.replyError(message.error)
        case .streaming, .cancelled, .interrupted: who += " · " + message.status.rawValue
        }
        return "── " + who
    }
}

struct Export: ClientCommand {
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case markdown, json, jsonl
    }

    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a whole conversation to standard output as markdown, JSON or JSON lines.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Option(help: "markdown (headers with author, time and role), json (an array of message objects) or jsonl (one per line).")
    var format: Format = .markdown

    func run() throws {
        let connection = try Connection.start(socketPath, command: "export")
        let conversation = try connection.resolveConversation(id)
        let info = try connection.call(GetCall.self, ConversationTarget(conversation: conversation)).conversation
        var out: String
        switch format {
        case .json, .jsonl:
            // The messages as confabd encoded them, made terminal-safe byte by byte: the same
            // bytes as parsing each and writing its `terminalSafeText`, in a fraction of the time.
            let separator = format == .json ? UInt8(ascii: ",") : 0x0A
            var chunks = try wholeEncodedHistory(connection, conversation) { page in
                var bytes: [UInt8] = []
                page.writeMessages(into: &bytes, separator: separator)
                return bytes
            }
            if format == .json, let last = chunks.lastIndex(where: { !$0.isEmpty }) { chunks[last].removeLast() }
            if isatty(1) == 0 {
                // Into a file or a pipe, a page at a time.
                if format == .json { Out.stdout([UInt8(ascii: "[")]) }
                for chunk in chunks where !chunk.isEmpty { Out.stdout(chunk) }
                if format == .json { Out.stdout(Array("]\n".utf8)) }
                return
            }
            var bytes: [UInt8] = format == .json ? [UInt8(ascii: "[")] : []
            for chunk in chunks { bytes += chunk }
            if format == .json { bytes.append(contentsOf: [UInt8(ascii: "]"), 0x0A]) }
            out = String(decoding: bytes, as: UTF8.self)
        case .markdown:
            let messages = try wholeHistory(connection, conversation)
            let compaction = try compactionInForce(connection, conversation)
            out = "# \(info.title)\n"
            for message in messages.compactMap(Message.init(json:)) {
                let time = LocalTime.dateAndClock(message.created)
                let header: String
                switch message.role {
                case .assistant:
                    header = Role.assistant.rawValue + (message.model.map { " (\($0))" } ?? "")
                case .tool:
                    header = Role.tool.rawValue + ": " + ToolLines.name(of: message) + " (" + (message.tool?.callID ?? "?") + ")"
                case .user, .system:
                    header = Role.user.rawValue + ": " + Words.authorName(message)
                }
                var status = ""
                if message.status != .complete { status = " [\(message.status.rawValue)]" }
                out += "\n## \(header), \(time)\(status)\n\n"
                out += Self.quotedThought(message)
                out += message.content
                if out.last != "\n" { out += "\n" }
                if let attachments = message.attachments, !attachments.isEmpty {
                    // Listed, not embedded: `confab attachment ID MSG N` writes one out.
                    if !message.content.isEmpty { out += "\n" }
                    out += attachments.map { "- " + AttachmentText.exported($0) + "\n" }.joined()
                }
                let calls = ToolLines.calls(of: message)
                if !calls.isEmpty {
                    out += "\n" + calls.map { "- " + ToolCallFormat.call(name: $0.name, arguments: $0.arguments, width: Int.max / 2) + "\n" }.joined()
                }
                if let compaction, message.id == compaction.last { out += "\n" + compaction.line + "\n" }
            }
        }
        // Into a file or a pipe, exactly the data; on a terminal, nothing that drives it.
        Out.stdout(isatty(1) != 0 ? SafeText.sanitized(out) : out)
    }
}

extension Export {
    /// A reply's thought as a quoted block before its text (`> **Thought for 12 s**`), each of
    /// its lines quoted, so nothing in it can close or open a block around it.
    static func quotedThought(_ message: Message) -> String {
        guard message.role == .assistant, let thought = message.reasoning else { return "" }
        let seconds = thought.seconds(now: thought.ended ?? thought.started)
        var out = "> **Thought for \(seconds) s**\n>\n"
        let text = thought.text.trimmingAll("\n")
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            out += line.isEmpty ? ">\n" : "> " + line + "\n"
        }
        if thought.redactedBlocks > 0 { out += ">\n> (\(Words.count(thought.redactedBlocks, "encrypted block")) not shown)\n" }
        return out + "\n"
    }
}

extension String {
    fileprivate func trimmingAll(_ set: Character) -> String {
        var text = Substring(self)
        while text.first == set { text.removeFirst() }
        while text.last == set { text.removeLast() }
        return String(text)
    }
}

struct Remove: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Delete a conversation (asks first on a terminal, unless -f).",
        aliases: ["delete"])

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Flag(name: [.short, .long], help: "Do not ask.") var force = false
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String

    func run() throws {
        let connection = try Connection.start(socketPath, command: "rm")
        let conversation = try connection.resolveConversation(id)
        if !force, isatty(0) != 0, isatty(2) != 0 {
            let info = try connection.call(GetCall.self, ConversationTarget(conversation: conversation)).conversation
            let title = SafeText.singleLine(info.title)
            let count = Words.count(info.messageCount, "message")
            var question = "delete \"\(title)\" (\(conversation), \(count))? [y/N] "
            _ = question.withUTF8 { Out.writeAll(2, UnsafeRawBufferPointer($0)) }
            let answer = Self.readLine().lowercased()
            guard answer == "y" || answer == "yes" else {
                Out.errorLine("not deleted")
                throw Failure.exit(1)
            }
        }
        _ = try connection.call(DeleteCall.self, ConversationTarget(conversation: conversation))
    }

    /// One line from standard input, without its newline.
    private static func readLine() -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while (try? withUnsafeMutableBytes(of: &byte) { (raw) throws(Errno) -> Int in try Files.read(0, into: raw) }) == 1,
              byte != 0x0A { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self).trimmingWhitespace
    }
}

struct Cancel: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Stop the reply in flight in a conversation.",
        discussion: "Prints nothing when a reply was stopped; exits 1 with \"nothing to cancel\" when none was streaming.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String

    func run() throws {
        let connection = try Connection.start(socketPath, command: "cancel")
        let conversation = try connection.resolveConversation(id)
        if try connection.call(CancelCall.self, CancelParams(conversation: conversation)).cancelled == nil {
            throw Failure.message("nothing to cancel")
        }
    }
}
