#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Terminal

// The commands that change a conversation's course (retry, continue, fork) and search.

struct Retry: ReplyCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Ask for a new reply to a conversation's last message and stream it to standard output.",
        discussion: """
            The reply it replaces stays in the history, marked as superseded, and is left out \
            of what the model is sent from then on. Ctrl-C stops the new reply (exit 130).
            """)

    static let method = RPCMethod.messageRegenerate

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @OptionGroup var options: ReplyOptions
}

struct ContinueReply: ReplyCommand {
    static let configuration = CommandConfiguration(
        commandName: "continue",
        abstract: "Continue a reply the model cut off at its length limit; the rest streams to standard output.",
        discussion: """
            Only a last reply that stopped for length (finish reason "\(FinishReason.length.rawValue)") can be \
            continued; the new text is appended to the same message.
            """)

    static let method = RPCMethod.messageContinue

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @OptionGroup var options: ReplyOptions
}

/// A command whose one request makes a reply in a conversation (`method`, answered with
/// `reply`), which it then streams to standard output as `ask` does.
protocol ReplyCommand: ClientCommand {
    static var method: RPCMethod { get }
    var options: ReplyOptions { get }
}

/// What every `ReplyCommand` takes.
struct ReplyOptions: ParsableArguments {
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Flag(help: "Print the reply's final message object as JSON instead of its text.") var json = false
    @Flag(name: [.customLong("plain"), .customLong("raw")],
          help: "The reply's text as it is, without rendering (the default when standard output is not a terminal).")
    var plain = false
}

extension ReplyCommand {
    func run() throws {
        let connection = try Connection.start(socketPath, command: Self.configuration.commandName ?? "confab")
        let conversation = try connection.resolveConversation(options.id)
        // Quiet, as ask: following the reply is not joining the conversation.
        let attached = try connection.call(AttachCall.self, AttachParams(conversation: conversation, history: 0, quiet: true))
        guard let reply = ReplyStarted(json: try connection.call(Self.method, ConversationTarget(conversation: conversation).json))?.reply else {
            throw Failure.message("confabd's answer to \(Self.method.rawValue) has no reply id")
        }
        let stream = AskStream(connection: connection, socketPath: socketPath, conversation: conversation, reply: reply,
                               json: options.json, render: !options.plain, attached: attached)
        let status = try stream.run()
        if status != 0 { throw Failure.exit(status) }
    }
}

struct Fork: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "fork",
        abstract: "Copy a conversation, up to a message, into a new one and print its id.",
        discussion: """
            The copy holds every message up to and including --at (default: all of them), \
            with new ids from m1 (`confab show` prints each message's id). When the copy \
            ends with a question, the new conversation answers it (attach to watch).
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Option(help: ArgumentHelp("The last message to copy (e.g. m4).", valueName: "message")) var at: String?
    @Option(help: "The new conversation's title (default: \"fork of\" and the title).") var title: String?

    func validate() throws {
        if let at, MessageID.sequence(of: at) == nil { throw ValidationError("--at takes a message id such as m4") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "fork")
        let conversation = try connection.resolveConversation(id)
        let result = try connection.call(ForkCall.self, ForkParams(conversation: conversation, at: at, title: title))
        let made = result.conversation.id
        Out.stdout(made + "\n")
        if let reply = result.reply {
            Out.errorLine("the copy ends with a question: reply \(reply) is being made (confab attach \(made))")
        }
    }
}

struct Search: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Find messages in every conversation, newest first.",
        discussion: """
            A message matches when it holds TEXT, ignoring case, or every word of it in any \
            order. Each hit shows the conversation's id and title, the message's id and time, \
            and the text around the hit; `confab show ID` or `confab attach ID` opens it.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(name: [.customShort("n"), .customLong("limit")], help: "Show at most this many hits (1 to 1000; default 20).")
    var limit = 20
    @Option(name: [.customShort("c"), .customLong("conversation")],
            help: ArgumentHelp("Search only this conversation (id or unique prefix).", valueName: "id"),
            completion: .conversationIDs)
    var conversation: String?
    @Flag(help: "Print the raw hits array as JSON.") var json = false
    @Argument(help: "What to look for; words are joined with spaces.") var text: [String]

    func validate() throws {
        if !(1...1000).contains(limit) { throw ValidationError("-n must be between 1 and 1000") }
        if text.joined(separator: " ").isBlank { throw ValidationError("Missing expected argument '<text> ...'") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "search")
        var params = SearchParams(query: text.joined(separator: " "), limit: limit)
        if let conversation { params.conversation = try connection.resolveConversation(conversation) }
        let raw = try connection.call(.conversationSearch, params.json)
        if json {
            Out.json(raw["hits"] ?? .array([]))
            return
        }
        let hits = try Connection.read(SearchCall.self, raw).hits
        if hits.isEmpty {
            Out.errorLine("no message holds \"\(SafeText.singleLine(text.joined(separator: " ")))\"")
            throw Failure.exit(1)
        }
        let colour = isatty(1) != 0 && (Environment.get("NO_COLOR") ?? "").isEmpty
        Out.stdout(Self.render(hits, width: TerminalSize.of(1)?.columns, colour: colour))
    }

    /// Two lines a hit: where (conversation id, message id, local time, title), then who and
    /// the text around the hit, indented. Titles and snippets are others' text: made safe.
    static func render(_ hits: [FoundMessage], width: Int?, colour: Bool) -> String {
        func styled(_ text: String, _ code: String) -> String { colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
        var out = ""
        for hit in hits {
            let place = "\(hit.conversation) \(hit.message)  " + LocalTime.dateAndClock(hit.created) + "  "
            let title = SafeText.singleLine(hit.title)
            let room = width.map { max(8, $0 - DisplayWidth.of(place)) }
            out += styled(place, "2") + styled(room.map { DisplayWidth.truncate(title, to: $0) } ?? title, "1") + "\n"
            let who = hit.role.rawValue + ": "
            let snippet = SafeText.singleLine(hit.snippet)
            let line = "    " + who + snippet
            out += (width.map { DisplayWidth.truncate(line, to: $0) } ?? line) + "\n"
        }
        return out
    }
}
