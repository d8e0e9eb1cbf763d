#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import Posix
import Terminal

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The daemon's socket (default: $CONFAB_SOCKET, else $XDG_RUNTIME_DIR/confab/confabd.sock).",
        valueName: "path"))
    var socket: String?
}

/// A command that talks to the daemon: `--socket` may come before or after its name.
protocol ClientCommand: ParsableCommand {
    var global: GlobalOptions { get }
    var root: Confab { get }
}

extension ClientCommand {
    var socketPath: String {
        global.socket ?? root.global.socket ?? ConfabPaths.current().socket
    }
}

@main
struct Confab: ParsableCommand {
    @OptionGroup var global: GlobalOptions

    static let configuration = CommandConfiguration(
        commandName: "confab",
        abstract: "Talk to LLMs through confabd.",
        discussion: """
            Conversation ids may be shortened to a unique prefix of at least 4 characters.
            Exit status: 0 success, 1 error from the daemon or the reply, 2 usage error, \
            3 daemon not reachable, 4 reply cut off at the length limit (ask, retry, continue), \
            5 the owner stopped sharing the conversation before the reply ended (ask, retry, continue), \
            130 interrupted, 141 the reader of the reply went away.

            Shell integration (confab shell-init bash|zsh|fish): Alt-a turns the command line \
            into a command (nothing runs; Ctrl-C while it waits keeps the line), Alt-e explains \
            it, ?? TEXT asks in the shell session's conversation.

            Environment: CONFAB_SOCKET (the socket), CONFAB_NAME (your display name), \
            CONFAB_DAEMON_USER (use another user's shared daemon), CONFAB_SESSION (the shell \
            session, set by shell-init, for -C), CONFAB_LAST_COMMAND and CONFAB_LAST_STATUS \
            (for ask --last, set by shell-init), NO_COLOR, XDG_RUNTIME_DIR.
            """,
        version: ProtocolVersion.confabVersion,
        subcommands: [New.self, List.self, Ask.self, Attach.self, Show.self, Export.self, AttachmentCommand.self, Rename.self, Configure.self, Remove.self, Cancel.self, Status.self,
                      Retry.self, ContinueReply.self, Fork.self, Compact.self, Uncompact.self, Search.self, ModelsCommand.self, Profiles.self, ToolsCommand.self, Share.self, Unshare.self,
                      ShellInit.self, ShellKey.self, Completions.self, Web.self, Wait.self, UsageCommand.self])

    static func main() {
        // A daemon that went away shows up as EPIPE on the socket, not as a signal.
        signal(SIGPIPE, SIG_IGN)
        // Interrupting a streamed reply just leaves: the daemon carries on with it.
        signal(SIGINT) { _ in _exit(130) }
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.isEmpty {
            Out.stdout(shortUsage)
            Out.exit(0)
        }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            // Only once parsing failed: looking at every command's name costs each start.
            if let unknown = unknownCommand(in: arguments) {
                var text = "Error: unknown command '\(SafeText.singleLine(unknown))'."
                if let near = nearestCommand(to: unknown) { text += " Did you mean '\(near)'?" }
                Out.errorLine(text + "\nSee 'confab --help' for the commands.")
                Out.exit(2)
            }
            exitForParseError(error)
        }
        do {
            try command.run()
        } catch let failure as Failure {
            failure.report()
        } catch {
            exitForParseError(error)
        }
        Out.exit(0)
    }

    /// What `confab` alone prints: what to type first, not the whole of `--help`.
    static let shortUsage = """
        usage: confab <command> [options]     (confab --help lists every command)

        To start:
          confab new --title NAME           make a conversation and print its id
          confab attach ID                  chat in it, with others (Ctrl-D leaves)
          confab ask TEXT                   one question; the reply on standard output
          confab ls                         your conversations
          eval "$(confab shell-init bash)"  Alt-a, Alt-e and ?? in your shell (also zsh, fish)

        confab help COMMAND (or confab COMMAND --help) explains one command.

        """

    /// Every name a subcommand answers to, `help` included.
    static var commandNames: [String] {
        var names = ["help"]
        for subcommand in configuration.subcommands {
            let settings = subcommand.configuration
            names.append(settings.commandName ?? subcommand._commandName)
            names += settings.aliases
        }
        return names
    }

    /// The first word of `arguments` that stands where a command's name goes and is none:
    /// argument-parser would call it an unexpected argument.
    static func unknownCommand(in arguments: [String]) -> String? {
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if word == "--socket" { index += 2; continue }
            if word.hasPrefix("--socket=") { index += 1; continue }
            // Options, and the completion scripts' own requests, are argument-parser's business.
            if word.hasPrefix("-") { return nil }
            return commandNames.contains(word) ? nil : word
        }
        return nil
    }

    /// The command `word` was most likely meant to be: a name within two edits of it (a
    /// letter left out, added, changed or two swapped), or one it is the start of.
    static func nearestCommand(to word: String) -> String? {
        let typed = Array(word.lowercased())
        let names = commandNames.filter { $0 != "shell-key" }
        var best: (name: String, distance: Int)?
        for name in names {
            let distance = Typos.editDistance(typed, Array(name))
            if distance <= min(2, max(1, name.count / 3)), best == nil || distance < best!.distance { best = (name, distance) }
        }
        if let best { return best.name }
        let starting = names.filter { typed.count >= 2 && $0.hasPrefix(String(typed)) }
        return starting.count == 1 ? starting[0] : nil
    }


    /// argument-parser's own handling, except that usage errors exit 2.
    private static func exitForParseError(_ error: any Error) -> Never {
        if exitCode(for: error) == .validationFailure {
            Out.errorLine(fullMessage(for: error))
            Out.exit(2)
        }
        exit(withError: error)
    }
}

// MARK: - Small commands

struct New: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Create a conversation and print its id.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Option(help: "The conversation's title.") var title: String?
    @Option(help: "A system prompt.") var system: String?
    @Option(name: [.customShort("m"), .customLong("model")], help: "The model (default: the profile's, else the daemon's).") var model: String?
    @Option(help: "The profile to start from (confab profiles lists them; default: the config's default_profile, if any).") var profile: String?
    @Option(help: ArgumentHelp("The provider its replies come from, as confab models names it (default: the profile's, else the config's default_provider); it stays for the conversation's life.",
                               valueName: "name"))
    var provider: String?

    func run() throws {
        let connection = try Connection.start(socketPath, command: "new")
        let info = try createConversation(connection, title: title, system: system, model: model, profile: profile, provider: provider)
        Out.stdout(info.id + "\n")
    }
}

/// `conversation.create`; the new conversation.
func createConversation(_ connection: Connection, title: String?, system: String?, model: String?,
                        profile: String? = nil, provider: String? = nil) throws(Failure) -> ConversationInfo {
    var params = CreateParams()
    if let provider {
        params.provider = provider
        if let model { try checkModel(model, of: provider, connection) }
    }
    params.profile = profile
    params.title = title
    params.system = system
    params.model = model
    return try connection.call(CreateCall.self, params).conversation
}

/// A model named with `--provider` must be one `confab models --provider NAME` lists: a typo
/// would otherwise only show when the first reply fails. A provider whose listing cannot be had
/// (unreachable, or a server with no listing) lets any name through.
func checkModel(_ model: String, of provider: String, _ connection: Connection) throws(Failure) {
    let listed = try connection.call(ModelsListCall.self, ModelsListParams(provider: provider)).models.map(\.id)
    guard !listed.isEmpty, !listed.contains(model) else { return }
    let shown = listed.count > 8 ? listed.prefix(8).joined(separator: ", ") + ", …" : listed.joined(separator: ", ")
    throw .message(SafeText.singleLine("provider \(provider) has no model \(model): it lists \(shown) (confab models --provider \(provider))"))
}

struct Rename: ClientCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "Give a conversation a new title.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Argument(help: "The new title (words are joined with spaces).") var title: [String]

    func validate() throws {
        if title.joined(separator: " ").isBlank { throw ValidationError("Missing expected argument '<title> ...'") }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "rename")
        let conversation = try connection.resolveConversation(id)
        var params = RenameParams()
        (params.conversation, params.title) = (conversation, title.joined(separator: " "))
        _ = try connection.call(RenameCall.self, params)
    }
}

struct Configure: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "configure",
        abstract: "Change the model, system prompt or profile a conversation's next replies use.",
        discussion: "A reply already streaming keeps the settings it started with. Prints nothing on success.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Option(name: [.customShort("m"), .customLong("model")], help: "The model.") var model: String?
    @Option(help: "The system prompt (\"\" clears it).") var system: String?
    @Option(help: "A profile whose model, system prompt and parameters to take (confab profiles lists them); --model and --system win over it.")
    var profile: String?
    @Option(help: "How hard a reasoning model thinks: a level its server takes, such as low, medium or high.")
    var reasoningEffort: String?

    func validate() throws {
        if model == nil, system == nil, profile == nil, reasoningEffort == nil {
            throw ValidationError("give at least one of --model, --system, --profile and --reasoning-effort")
        }
        if let reasoningEffort, !SamplingParameters.isEffortLevel(reasoningEffort) {
            throw ValidationError("--reasoning-effort must be a level such as low, medium or high: 1 to 32 lowercase letters")
        }
    }

    func run() throws {
        let connection = try Connection.start(socketPath, command: "configure")
        try configureConversation(connection, try connection.resolveConversation(id), model: model, system: system, profile: profile,
                                  reasoningEffort: reasoningEffort)
    }
}

/// `conversation.configure`.
func configureConversation(_ connection: Connection, _ id: String, model: String?, system: String?, profile: String?,
                           reasoningEffort: String? = nil) throws(Failure) {
    var params = ConfigureParams()
    (params.conversation, params.profile, params.system, params.model) = (id, profile, system, model)
    params.params = reasoningEffort.map { SamplingParameters(reasoningEffort: $0) }
    _ = try connection.call(ConfigureCall.self, params)
}

struct Status: ClientCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show the daemon's state.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Flag(help: "Print the raw status object as JSON.") var json = false

    func run() throws {
        let connection = try Connection.start(socketPath, command: "status")
        let raw = try connection.call(.status)
        if json {
            Out.json(raw)
            return
        }
        let result = try Connection.read(StatusCall.self, raw)
        var lines = "\(result.server) \(result.version) (protocol \(result.protocolVersion))\n"
        lines += "uptime:        \(Self.duration(Double(result.uptimeSeconds)))\n"
        lines += "conversations: \(result.conversations)\n"
        lines += "clients:       \(result.clients)\n"
        lines += "streams:       \(result.streams)\n"
        lines += "queued:        \(result.queued)\n"
        Out.stdout(lines)
    }

    static func duration(_ seconds: Double) -> String {
        var left = max(0, Int(seconds))
        let days = left / 86400; left %= 86400
        let hours = left / 3600; left %= 3600
        let minutes = left / 60
        let secs = left % 60
        var parts: [String] = []
        if days > 0 { parts.append("\(days)d") }
        if days > 0 || hours > 0 { parts.append("\(hours)h") }
        if days > 0 || hours > 0 || minutes > 0 { parts.append("\(minutes)m") }
        parts.append("\(secs)s")
        return parts.joined(separator: " ")
    }
}
