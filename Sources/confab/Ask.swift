#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Posix
import Terminal
import ShellIntegration

struct Ask: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "ask",
        abstract: "Send a prompt and stream the reply to standard output.",
        discussion: """
            The prompt is TEXT; when standard input is not a terminal, all of it is read and \
            added after a blank line (or used alone without TEXT); with neither, one line is \
            read from the terminal. Without -c, -C or --new the prompt goes to the day's \
            conversation, titled "ask YYYY-MM-DD", so one-shot questions do not pile up. \
            -C continues this shell session's conversation (after confab shell-init), else the \
            most recently active one. A new conversation's id is printed on standard error.

            Ctrl-C cancels the reply (exit 130). A reader that goes away (| head) cancels it \
            when nobody else is attached to the conversation; with others watching, the reply \
            goes on for them, as when a terminal closes; either way the exit is SIGPIPE's (141). \
            A reply cut off at the model's length limit is said on standard error and exits 4 \
            (confab continue ID goes on with it), as does one whose model spent its whole \
            token limit thinking (the message says what to raise). While the model thinks, a \
            terminal's standard error shows `thinking… 12 s` and its newest line of thought; \
            --reasoning writes the thought itself to standard error (never to standard \
            output). When confabd restarts meanwhile, ask waits \
            for it to come back and prints the reply as stored.

            -a FILE (--attach, repeatable) sends files with the prompt: text files (UTF-8, \
            by their content, whatever their name) and PNG, JPEG, GIF and WebP images. A text \
            file may be at most 1 MiB, an image 5 MiB, and one message carries at most 16 files \
            and 20 MiB. Every file is read and checked before anything is sent; anything else \
            is refused, naming the file and why. With files the prompt may be empty \
            (confab ask -a shot.png < /dev/null).
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(name: [.customShort("c"), .customLong("conversation")],
            help: ArgumentHelp("Continue this conversation (id or unique prefix).", valueName: "id"),
            completion: .conversationIDs)
    var conversation: String?
    @Flag(name: [.customShort("C"), .customLong("continue")],
          help: "Continue this shell session's conversation (see shell-init), else the most recently active one.")
    var continuing = false
    @Flag(help: "Start a new conversation instead of the day's.") var new = false
    @Flag(help: "Include the previous command line and its exit status (set by the shell-init snippet).")
    var last = false
    @Option(help: "Title of the new conversation (default: the prompt's first line; implies --new).") var title: String?
    @Option(help: "System prompt of the new conversation (implies --new); with -c or -C, the conversation's from now on (\"\" clears it).")
    var system: String?
    @Option(name: [.customShort("m"), .customLong("model")],
            help: "Model of the new conversation (default: the profile's, else the daemon's; implies --new); with -c or -C, the conversation's from now on.")
    var model: String?
    @Option(help: "Profile of the new conversation (confab profiles lists them; implies --new).") var profile: String?
    @Option(help: ArgumentHelp("Provider of the new conversation, as confab models names it (implies --new; --model is checked against its models).",
                               valueName: "name"))
    var provider: String?
    @Option(name: [.customShort("a"), .customLong("attach")],
            help: ArgumentHelp("Send this file with the prompt: a text file or a PNG, JPEG, GIF or WebP image (repeatable).",
                               valueName: "file"),
            completion: .file())
    var attach: [String] = []
    @Flag(help: "Print the reply's final message object as JSON instead of its text.") var json = false
    @Flag(help: "Write the model's thought (its reasoning) to standard error as it comes: made safe on a terminal, as it is into a pipe or file.")
    var reasoning = false
    @Flag(name: [.customLong("plain"), .customLong("raw")],
          help: "The reply's text as it is, without rendering (the default when standard output is not a terminal).")
    var plain = false
    /// Options come before the prompt: from its first word on, everything is prompt text
    /// (`confab ask explain git commit -m please` asks about `-m`). A prompt that starts with a
    /// dash goes after `--`.
    @Argument(parsing: .captureForPassthrough,
              help: "The prompt; its words are joined with spaces. Options go before it: from its first word on, -m, --raw and the like are words of the prompt. A prompt that starts with '-' goes after --.")
    var text: [String] = []

    /// The prompt's words: a leading `--` ends the options and is not one of them.
    private var words: ArraySlice<String> { text.first == "--" ? text.dropFirst() : text[...] }

    func validate() throws {
        // The prompt captures every word from its first on, --help too: asked for before any
        // prompt word, it is help, as for every other command.
        if let first = text.first, first == "--help" || first == "-h" { throw CleanExit.helpRequest(self) }
        if let first = text.first, first != "--", first.count > 1, first.hasPrefix("-") {
            // An option ask does not know, where the prompt would start: a typo, most likely.
            throw ValidationError("unknown option '\(first)'; a prompt that starts with '-' goes after '--' (confab ask -- \(first) …)")
        }
        let targets = [conversation != nil, continuing, new].filter { $0 }.count
        if targets > 1 { throw ValidationError("-c, -C and --new each choose the conversation; give one of them") }
        if conversation != nil || continuing, title != nil || profile != nil {
            throw ValidationError("--title and --profile make a new conversation; they cannot go with -c or -C "
                + "(confab rename and confab configure --profile change an existing one)")
        }
        if conversation != nil || continuing, provider != nil {
            throw ValidationError("--provider makes a new conversation; it cannot go with -c or -C (a conversation's provider stays for its life)")
        }
    }

    /// With -c or -C, --system and --model change the conversation before the prompt goes.
    private var choosesExisting: Bool { conversation != nil || continuing }

    /// A new conversation is made for --new and for any of its settings.
    private var makesNew: Bool { new || (!choosesExisting && (title != nil || system != nil || model != nil || profile != nil || provider != nil)) }

    func run() throws {
        // Every file is read and checked before anything goes to the daemon.
        let files: [FileAttachment]
        do throws(AttachmentProblem) {
            files = try FileAttachment.readAll(attach)
        } catch {
            throw Failure.message(error.description)
        }
        var prompt = try readPrompt(withFiles: !files.isEmpty)
        if last { prompt = try Self.withLastCommand(prompt) }
        let connection = try Connection.start(socketPath, command: "ask")

        let id: String
        // Made for this prompt: removed again when the daemon refuses it before storing it.
        var made = false
        if let conversation {
            id = try connection.resolveConversation(conversation)
        } else if continuing {
            id = try ConversationChoice.continuing(connection)
        } else if makesNew {
            id = try createConversation(connection, title: title ?? Self.title(from: prompt) ?? files.first?.name, system: system, model: model, profile: profile, provider: provider).id
            Out.errorLine("conversation \(id)")
            made = true
        } else {
            let today = try ConversationChoice.todayOrMade(connection)
            id = today.id
            made = today.made
        }
        if choosesExisting, system != nil || model != nil {
            try configureConversation(connection, id, model: model, system: system, profile: nil)
            // Said out loud: the change outlives this question.
            var changed: [String] = []
            if let model { changed.append("model \(model)") }
            if let system { changed.append(system.isEmpty ? "no system prompt" : "a new system prompt") }
            Out.errorLine("conversation \(id) now uses \(changed.joined(separator: " and ")) for every reply")
        }
        // Quiet: following our own reply is not joining the conversation. (A chosen
        // conversation is attached already, as quietly: attaching again is harmless.)
        let attached = try connection.call(AttachCall.self, AttachParams(conversation: id, history: 0, quiet: true))
        var params = SendParams(conversation: id, content: prompt)
        let sent: JSON
        do throws(Failure) {
            if !files.isEmpty { params.attachments = try AttachmentRef.upload(files, over: connection) }
            sent = try connection.call(.messageSend, params.json)
        } catch {
            // Refused before anything was stored (an image to a model that takes none, a file
            // too large): the conversation made for it would stay behind empty.
            if made, case .rpc = error { Self.removeIfEmpty(connection, id) }
            throw error
        }
        guard let reply = ReplyStarted(json: sent)?.reply else {
            throw Failure.message("confabd's answer to \(RPCMethod.messageSend.rawValue) has no reply id")
        }
        let stream = AskStream(connection: connection, socketPath: socketPath, conversation: id, reply: reply, json: json,
                               render: !plain, attached: attached, reasoning: reasoning)
        let status = try stream.run()
        if status != 0 { throw Failure.exit(status) }
    }

    /// Deletes conversation `id` if it holds no message (nobody else wrote to it meanwhile).
    private static func removeIfEmpty(_ connection: Connection, _ id: String) {
        guard let page = try? connection.call(HistoryCall.self, HistoryParams(conversation: id, before: nil, limit: 1)),
              page.messages.isEmpty else { return }
        _ = try? connection.call(DeleteCall.self, ConversationTarget(conversation: id))
    }

    /// TEXT, and standard input when it is not a terminal. With files attached the prompt
    /// may be empty, and a terminal is not asked for one: the files are the question.
    private func readPrompt(withFiles: Bool) throws(Failure) -> String {
        var prompt = words.joined(separator: " ")
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
        } else if prompt.isBlank, !withFiles {
            prompt = Self.readLineFromTerminal()
        }
        if prompt.isBlank, withFiles { return "" }
        if prompt.isBlank {
            throw .usage("nothing to ask: give TEXT, pipe it on standard input, or attach a file with -a", command: "ask")
        }
        return prompt
    }

    /// One line typed at an `ask> ` prompt (the terminal's own line editing).
    private static func readLineFromTerminal() -> String {
        Out.stderrText("ask> ")
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = (try? withUnsafeMutableBytes(of: &byte) { (raw) throws(Errno) -> Int in try Files.read(0, into: raw) }) ?? -1
            if count <= 0 || byte == 0x0A { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// `--last`: the previous command line and its status, which the shell-init snippet
    /// passes in CONFAB_LAST_COMMAND and CONFAB_LAST_STATUS for this one call.
    static func withLastCommand(_ prompt: String) throws(Failure) -> String {
        guard let command = Environment.get("CONFAB_LAST_COMMAND"), !command.isBlank else {
            throw .usage("--last needs the previous command from the shell integration (see confab shell-init)", command: "ask")
        }
        let status = Environment.get("CONFAB_LAST_STATUS").flatMap { Int($0) }.map(String.init) ?? "unknown"
        return Prompts.withLastCommand(prompt, command: command.trimmingWhitespace, status: status)
    }

    /// The new conversation's title: the prompt's first non-blank line, at most 60 characters.
    static func title(from prompt: String) -> String? {
        let line = prompt.split(whereSeparator: \.isNewline).map { String($0).trimmingWhitespace }.first { !$0.isEmpty } ?? ""
        guard !line.isEmpty else { return nil }
        return String(line.prefix(60)).trimmingWhitespace
    }
}
