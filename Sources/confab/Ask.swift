#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Posix
import Terminal

struct Ask: ClientCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a prompt and stream the reply to standard output.",
        discussion: """
            The prompt is TEXT; when standard input is not a terminal, all of it is read and \
            added after a blank line (or used alone without TEXT). Without -c a new \
            conversation is made first and its id printed on standard error.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(name: [.customShort("c"), .customLong("conversation")],
            help: ArgumentHelp("Continue this conversation (id or unique prefix).", valueName: "id"))
    var conversation: String?
    @Option(help: "Title of the new conversation (default: the prompt's first line).") var title: String?
    @Option(help: "System prompt of the new conversation.") var system: String?
    @Option(help: "Model of the new conversation (default: the daemon's).") var model: String?
    @Flag(help: "Print the reply's final message object as JSON instead of its text.") var json = false
    @Flag(name: [.customLong("plain"), .customLong("raw")],
          help: "The reply's text as it is, without rendering (the default when standard output is not a terminal).")
    var plain = false
    @Argument(help: "The prompt; its words are joined with spaces.") var text: [String] = []

    func validate() throws {
        if conversation != nil, title != nil || system != nil || model != nil {
            throw ValidationError("--title, --system and --model make a new conversation; they cannot go with -c")
        }
    }

    func run() throws {
        let prompt = try readPrompt()
        let connection = try Connection.start(socketPath, command: "ask")

        let id: String
        if let conversation {
            id = try connection.resolveConversation(conversation)
        } else {
            id = try createConversation(connection, title: title ?? Self.title(from: prompt), system: system, model: model).id
            Out.errorLine("conversation \(id)")
        }
        // Quiet: following our own reply is not joining the conversation.
        let attached = try connection.call("conversation.attach", ["conversation": .string(id), "history": 0, "quiet": true])
        let sent = try connection.call("message.send", ["conversation": .string(id), "content": .string(prompt)])
        guard let reply = sent["reply"]?.string else { throw Failure.message("confabd's answer to message.send has no reply id") }
        let stream = AskStream(connection: connection, conversation: id, reply: reply, json: json,
                               others: attached["clients"]?.array ?? [])
        let status = try stream.run()
        if status != 0 { throw Failure.exit(status) }
    }

    /// TEXT, and standard input when it is not a terminal.
    private func readPrompt() throws(Failure) -> String {
        var prompt = text.joined(separator: " ")
        if isatty(0) == 0 {
            var piped: [UInt8]
            do {
                piped = try Files.readAll(0)
            } catch {
                throw Failure.message("cannot read standard input: \(error)")
            }
            while let last = piped.last, last == 0x0A || last == 0x0D { piped.removeLast() }
            let input = String(decoding: piped, as: UTF8.self)
            if !input.isBlank {
                prompt = prompt.isBlank ? input : prompt + "\n\n" + input
            }
        }
        if prompt.isBlank {
            throw .usage("nothing to ask: give TEXT or pipe it on standard input", command: "ask")
        }
        return prompt
    }

    /// The new conversation's title: the prompt's first non-blank line, at most 60 characters.
    static func title(from prompt: String) -> String? {
        let line = prompt.split(whereSeparator: \.isNewline).map { String($0).trimmed }.first { !$0.isEmpty } ?? ""
        guard !line.isEmpty else { return nil }
        return String(line.prefix(60)).trimmed
    }
}
