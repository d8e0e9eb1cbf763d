#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Posix
import ShellIntegration
import Terminal

extension Shell: ExpressibleByArgument {}

struct ShellInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell-init",
        abstract: "Print the shell integration to load from your shell's rc file.",
        discussion: """
            bash (~/.bashrc):                  eval "$(confab shell-init bash)"
            zsh (~/.zshrc):                    eval "$(confab shell-init zsh)"
            fish (~/.config/fish/config.fish): confab shell-init fish | source

            Keys: Alt-a turns the command line into a command (nothing runs: read it, edit it, \
            press Enter); a command of several lines is first listed above the prompt, \
            numbered, and one with control or invisible characters, or too tall for the \
            screen, is not put on the line at all. Ctrl-C while it waits gives the line back. Alt-e explains the command \
            on the line. ?? TEXT asks in this shell session's conversation, which \
            confab ask -C continues too (every word of TEXT is the question's: ?? passes --); \
            ?? --last TEXT adds the previous command line and its exit status. \
            The snippet is static (no daemon round trip): it can be saved to a file and sourced.
            """)

    @Argument(help: "bash, zsh or fish.") var shell: Shell
    @Option(name: .customLong("key"), help: ArgumentHelp("The key that turns the line into a command.", valueName: "alt-a"))
    var commandKey = "alt-a"
    @Option(name: .customLong("explain-key"), help: ArgumentHelp("The key that explains the command on the line.", valueName: "alt-e"))
    var explainKey = "alt-e"

    func validate() throws {
        _ = try keys()
    }

    private func keys() throws -> (command: Key, explain: Key) {
        let command: Key, explain: Key
        do {
            command = try Key(parsing: commandKey)
            explain = try Key(parsing: explainKey)
        } catch {
            throw ValidationError(error.description)
        }
        if command == explain { throw ValidationError("--key and --explain-key are the same key (\(command))") }
        return (command, explain)
    }

    func run() throws {
        let (command, explain) = try keys()
        // The snippet names this very binary, so it works off PATH and can be cached.
        let executable = Files.linkTarget("/proc/self/exe") ?? CommandLine.arguments[0]
        Out.stdout(Snippet(shell: shell, executable: executable, commandKey: command, explainKey: explain).text)
    }
}

/// What the shell snippet's keys run: `shell-key command` prints only the command for the
/// edit buffer; `shell-key explain` prints the explanation.
struct ShellKey: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell-key",
        abstract: "Run by the shell-init keys: turn a command line into a command, or explain it.",
        shouldDisplay: false)

    enum Action: String, ExpressibleByArgument, CaseIterable { case command, explain }

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "command or explain.") var action: Action
    @Option(help: "The shell the line is for.") var shell = "sh"
    @Argument(help: "The command line.") var line: [String] = []

    func run() throws {
        // Words joined by hand: joined(separator:) resolves its generic witnesses at run time,
        // which costs the key press more than building the prompt.
        var text = line.first ?? ""
        for word in line.dropFirst() { text += " " + word }
        guard !text.isBlank else { throw Failure.usage("nothing on the command line", command: "shell-key") }
        let status = KeySpinner()
        // Ctrl-C while waiting: the handler only records it; the wait loop stops our reply
        // and leaves (the shell keeps the line).
        signal(SIGINT) { _ in interruptRequested = 1 }
        do {
            try run(text, status: status)
        } catch {
            status.clear()
            throw error
        }
    }

    private func run(_ text: String, status: KeySpinner) throws {
        let connection = try Connection.start(socketPath, command: "shell-key")
        let conversation = try ConversationChoice.continuing(connection)
        let context = ShellContext(shell: shell, system: Self.systemName(), directory: ConversationChoice.currentDirectory())
        switch action {
        case .command:
            let prompt = Prompts.command(for: text, context: context)
            let reply = try ReplyWaiter(connection: connection, conversation: conversation, status: status).send(prompt)
            status.clear()
            try Self.insert(reply)
        case .explain:
            let prompt = Prompts.explain(text, context: context)
            var wrote = false
            // Line breaks are made "\n" across pieces (a CR LF may be split between two), then
            // whatever would act on the terminal is shown instead, as everywhere else.
            var lineBreaks = LineBreaks.Normalizer()
            _ = try ReplyWaiter(connection: connection, conversation: conversation, status: status).send(prompt) { piece in
                status.clear()
                Out.stdout(SafeText.sanitized(lineBreaks.feed(piece)))
                wrote = true
            }
            status.clear()
            Out.stdout(lineBreaks.finish())
            if wrote { Out.stdout("\n") }
        }
    }

    /// `Debian GNU/Linux 12 (bookworm)` from os-release (it says which package manager
    /// commands will work), else the kernel's name.
    static func systemName() -> String {
        if let bytes = try? Files.readAll(path: "/etc/os-release", limit: 1 << 16) {
            // Lines split as bytes: splitting the decoded file by Character cost more than the
            // rest of the key's own work.
            let key = Array("PRETTY_NAME=".utf8)
            for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: key) {
                var value = line.dropFirst(key.count)
                if value.first == UInt8(ascii: "\""), value.last == UInt8(ascii: "\""), value.count >= 2 { value = value.dropFirst().dropLast() }
                if !value.isEmpty { return SafeText.singleLine(String(decoding: value, as: UTF8.self)) }
            }
        }
        return ThisProcess.kernelName() ?? "Linux"
    }
}

/// A spinner on standard error while the reply is awaited, only when it is a terminal. It is
/// drawn over the prompt line, which the shell redraws when the key's function returns. While
/// a model that reasons thinks, the line is its thinking row instead (`thinking… 12 s · the
/// newest line of thought`, made safe and cut to the terminal's width so it never wraps).
final class KeySpinner {
    private let enabled = isatty(2) != 0
    private var frame = 0
    private var shown = false
    private var thought: Reasoning?
    private static let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

    /// The model's thought so far while it thinks; nil once its answer begins.
    func think(_ thought: Reasoning?) {
        self.thought = thought
        tick()
    }

    func tick() {
        guard enabled else { return }
        let spinner = Self.frames[frame % Self.frames.count] + " "
        let line: String
        if let thought {
            let width = max(10, (TerminalSize.of(2)?.columns ?? 80) - 1)
            line = spinner + ThoughtText.status(seconds: thought.seconds(now: Timestamp.now()), thought: thought.text, width: width - 2)
        } else {
            line = spinner + "confab is thinking… (Ctrl-C: keep the line)"
        }
        Out.stderrText("\r\u{1B}[K" + line)
        frame += 1
        shown = true
    }

    func clear() {
        guard shown else { return }
        Out.stderrText("\r\u{1B}[K")
        shown = false
    }
}

/// Set by the SIGINT handler of `shell-key`, read by its wait loop.
nonisolated(unsafe) var interruptRequested: sig_atomic_t = 0

/// Sends one prompt to an attached conversation and follows the whole reply, tool calls and
/// later turns included, as `ReplyFollower` reports it, ticking the status line every 100 ms
/// and handing each piece of text to `onDelta`. Ctrl-C (see `interruptRequested`) cancels
/// the reply once it streams, and exits 130. A call that waits for a yes is said once: the
/// key has no line to ask on, so it is answered from `confab attach` (or times out, denied).
struct ReplyWaiter {
    let connection: Connection
    let conversation: String
    let status: KeySpinner

    /// The reply's last turn's text: after tool calls, the model's final answer.
    func send(_ prompt: String, onDelta: ((String) -> Void)? = nil) throws(Failure) -> String {
        status.tick()
        let sent = try connection.call(.messageSend, SendParams(conversation: conversation, content: prompt).json)
        guard let reply = ReplyStarted(json: sent)?.reply else {
            throw .message("confabd's answer to \(RPCMethod.messageSend.rawValue) has no reply id")
        }
        var follower = ReplyFollower(conversation: conversation, reply: reply)
        var wroteTurn = false
        while true {
            if interruptRequested != 0 {
                status.clear()
                // A reply still queued behind another cannot be withdrawn; it runs and is kept.
                if follower.started {
                    _ = try? connection.call(CancelCall.self, CancelParams(conversation: conversation, message: reply))
                }
                throw .exit(130)
            }
            while let event = connection.nextEvent() {
                switch event {
                case .fatal(let error):
                    throw .rpc(error)
                case .response:
                    continue
                case .notification(.serverStopping):
                    throw .message("confabd is stopping before the reply finished")
                case .notification(let notification):
                    for progress in follower.take(notification) {
                        switch progress {
                        case .reasoning(_, _, let thought):
                            status.think(thought)
                        case .reasoningEnded:
                            status.think(nil)
                        case .text(_, let piece):
                            wroteTurn = true
                            onDelta?(piece)
                        case .turnEnded(let message) where message.continuesAfterTools:
                            // The next turn's text starts on a line of its own.
                            if wroteTurn { onDelta?("\n") }
                            wroteTurn = false
                        case .approvalRequested(let call):
                            status.clear()
                            Out.error("the reply's call of \(SafeText.singleLine(call.name)) waits for approval: "
                                + "answer it in confab attach \(conversation), or Ctrl-C")
                        case .finished(let end):
                            return try Self.text(of: end)
                        default:
                            continue
                        }
                    }
                }
            }
            var watches = [BlockingPoll.Watch(fd: connection.fd)]
            do {
                guard try BlockingPoll.wait(&watches, timeoutMilliseconds: 100) else { continue }
            } catch {
                throw .message("poll failed: \(error)")
            }
            if !watches[0].ready {
                status.tick()
                continue
            }
            guard try connection.receive() else { throw .disconnected }
        }
    }

    /// The text of a reply that ended well; the reason, when it did not.
    private static func text(of end: ReplyEnd) throws(Failure) -> String {
        switch end.outcome {
        case .complete, .cutAtLengthLimit:
            return end.message?.content ?? ""
        case .cancelled(let by):
            throw .message("the reply was cancelled" + (by.map { " by \(Words.clientName($0))" } ?? ""))
        case .failed(let error):
            throw .message("the reply failed: " + Words.replyError(error))
        case .interrupted:
            throw .message("the reply was interrupted: confabd stopped before it finished")
        case .conversationDeleted:
            throw .message("the conversation was deleted")
        case .unshared(let by):
            throw .message("the reply was cut off: \(Words.unshared(by: by))")
        }
    }
}

extension Out {
    /// Text on standard error as it is, without a line end (the status line draws over itself).
    static func stderrText(_ text: String) {
        var text = text
        _ = text.withUTF8 { writeAll(2, UnsafeRawBufferPointer($0)) }
    }
}

struct Completions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "completions",
        abstract: "Print the completion script for bash, zsh or fish.",
        discussion: """
            Conversation ids complete from the daemon, with their titles where the shell shows \
            descriptions (zsh, fish). make install puts the scripts where bash-completion, zsh \
            and fish look; or: source <(confab completions bash); \
            confab completions fish | source.
            """)

    @Argument(help: "bash, zsh or fish.") var shell: Shell

    func run() throws {
        guard let kind = CompletionShell(rawValue: shell.rawValue) else { throw Failure.message("no completions for \(shell)") }
        Out.stdout(Confab.completionScript(for: kind))
    }
}

extension CompletionKind {
    /// Conversation ids from the daemon (the `--socket` on the line, else the usual socket),
    /// most recently active first, each with its title where the shell can show one.
    static var conversationIDs: CompletionKind {
        .custom { words, _, _ in
            var socket = ConfabPaths.current().socket
            if let flag = words.firstIndex(of: "--socket"), flag + 1 < words.count { socket = words[flag + 1] }
            guard let connection = try? Connection.start(socket, command: "complete"),
                  let result = try? connection.call(ListCall.self, ListParams(limit: 1000)) else { return [] }
            let shell = CompletionShell.requesting
            return result.conversations.compactMap { conversation in
                let id = conversation.id
                let title = SafeText.singleLine(conversation.title)
                if title.isEmpty { return id }
                if shell == .zsh { return id + ":" + title }
                if shell == .fish { return id + "\t" + title }
                return id
            }
        }
    }
}
