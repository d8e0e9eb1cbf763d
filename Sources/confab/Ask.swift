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
        _ = try connection.call("conversation.attach", ["conversation": .string(id), "history": 0])
        let sent = try connection.call("message.send", ["conversation": .string(id), "content": .string(prompt)])
        guard let reply = sent["reply"]?.string else { throw Failure.message("confabd's answer to message.send has no reply id") }
        try stream(reply: reply, in: id, from: connection)
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

    /// Writes the reply's deltas as they come, then ends by its final status.
    private func stream(reply: String, in conversation: String, from connection: Connection) throws(Failure) {
        // On a terminal the reply is text for a person, and must not drive the terminal;
        // into a pipe or a file it goes byte for byte.
        let toTerminal = isatty(1) != 0
        func show(_ bytes: [UInt8]) {
            if toTerminal {
                Out.stdout(SafeText.sanitized(String(decoding: bytes, as: UTF8.self)))
            } else {
                Out.stdout(bytes)
            }
        }
        var written: [UInt8] = []
        func finish(content: String?) {
            // What the final message has beyond what we streamed (we attached before
            // sending, so normally nothing), then a newline unless there is one.
            if let content {
                let bytes = Array(content.utf8)
                if bytes.count > written.count, bytes.starts(with: written) {
                    let rest = Array(bytes[written.count...])
                    show(rest)
                    written += rest
                }
            }
            if let last = written.last, last != 0x0A { Out.stdout("\n") }
        }
        while true {
            guard let event = try connection.waitForEvent() else {
                if let last = written.last, last != 0x0A { Out.stdout("\n") }
                throw .message("confabd closed the connection before the reply finished")
            }
            guard case .notification(let method, let params) = event else {
                if case .fatal(let error) = event { throw .rpc(error) }
                continue
            }
            if method != "server.stopping", params["conversation"]?.string != conversation { continue }
            switch method {
            case "message.delta":
                guard params["message"]?.string == reply, let piece = params["content"]?.string, !piece.isEmpty else { continue }
                let bytes = Array(piece.utf8)
                show(bytes)
                written += bytes
            case "message.completed":
                guard let message = params["message"], message["id"]?.string == reply else { continue }
                finish(content: message["content"]?.string)
                let status = message["status"]?.string ?? "complete"
                if status == "complete" { return }
                throw .message("reply \(status)")
            case "message.failed":
                guard let message = params["message"], message["id"]?.string == reply else { continue }
                finish(content: message["content"]?.string)
                let reason = params["error"]?["message"]?.string ?? message["error"]?["message"]?.string ?? "unknown error"
                throw .message("reply failed: \(reason)")
            case "conversation.deleted":
                finish(content: nil)
                throw .message("the conversation was deleted")
            case "server.stopping":
                // Replies in flight are announced as interrupted before this, so ours
                // has not started (it was queued) and will not.
                finish(content: nil)
                let reason = params["reason"]?.string.map { " (\($0))" } ?? ""
                throw .message("confabd is stopping\(reason) before the reply finished")
            default:
                continue
            }
        }
    }
}
