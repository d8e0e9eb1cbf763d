#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Posix
import ShellIntegration

/// Which conversation a command without an explicit id talks to (docs/shell.md):
/// - `-C` (and the shell keys): the shell session's own conversation when `CONFAB_SESSION`
///   is set (made on first use, titled after the terminal and directory), else the most
///   recently active one;
/// - `ask` without `-c`/`-C`/`--new`: the day's conversation, `ask YYYY-MM-DD`.
/// Every choice ends attached (history 0, quietly), ready for `message.send`.
enum ConversationChoice {
    /// `-C`: the session's conversation, or the most recently active one.
    static func continuing(_ connection: Connection) throws(Failure) -> String {
        if let session = Environment.get("CONFAB_SESSION"), !session.isEmpty {
            guard ConversationNames.isValidSession(session) else {
                throw .message("CONFAB_SESSION must be letters, digits, '-', '_' and '.' (at most 128); got \"\(session)\"")
            }
            return try sessionConversation(connection, session: session)
        }
        if let id = try connection.call(ListCall.self, ListParams(limit: 1)).conversations.first?.id, try attachIfPresent(connection, id) {
            return id
        }
        return try today(connection)
    }

    /// The conversation of the shell session `session`, remembered in the runtime directory.
    private static func sessionConversation(_ connection: Connection, session: String) throws(Failure) -> String {
        let store = SessionStore()
        if let id = store.conversation(for: session), try attachIfPresent(connection, id) {
            return id
        }
        let title = ConversationNames.session(terminal: terminalName(), directory: currentDirectory(), home: Environment.get("HOME"))
        let id = try createConversation(connection, title: String(title.prefix(200)), system: nil, model: nil).id
        store.remember(id, for: session)
        try attach(connection, id)
        return id
    }

    /// `ask 2026-11-23`: found among the recent conversations by its title, else made.
    static func today(_ connection: Connection) throws(Failure) -> String {
        try todayOrMade(connection).id
    }

    /// `today`, and whether the conversation was made now (a send refused before anything
    /// was stored leaves no empty conversation behind: the caller deletes it).
    static func todayOrMade(_ connection: Connection) throws(Failure) -> (id: String, made: Bool) {
        let title = todayTitle()
        let found = try connection.call(ListCall.self, ListParams(limit: 1000)).conversations.first { $0.title == title }
        if let id = found?.id, try attachIfPresent(connection, id) {
            return (id, false)
        }
        let id = try createConversation(connection, title: title, system: nil, model: nil).id
        Out.errorLine("conversation \(id) (\(title))")
        try attach(connection, id)
        return (id, true)
    }

    static func todayTitle() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        return ConversationNames.day(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday))
    }

    static func attach(_ connection: Connection, _ id: String) throws(Failure) {
        _ = try connection.call(AttachCall.self, AttachParams(conversation: id, history: 0, quiet: true))
    }

    /// Attaches to `id`; false when it no longer exists.
    private static func attachIfPresent(_ connection: Connection, _ id: String) throws(Failure) -> Bool {
        do {
            try attach(connection, id)
            return true
        } catch .rpc(let error) where error.code == RPCError.notFound || error.code == RPCError.invalidParams {
            return false
        }
    }

    /// `pts/3`, from whichever of standard input, output and error is a terminal.
    static func terminalName() -> String? {
        for fd: Int32 in [0, 1, 2] where isatty(fd) != 0 {
            if let name = TerminalDevice.path(of: fd) { return name }
        }
        return nil
    }

    /// `$PWD` when it names the current directory (it keeps the user's symbolic links), else getcwd.
    static func currentDirectory() -> String {
        if let pwd = Environment.get("PWD"), pwd.hasPrefix("/"), Files.sameFile(".", pwd) {
            return pwd
        }
        return Files.workingDirectory() ?? "."
    }
}

/// Shell session → conversation id, one small file each in `sessions/` of the user's runtime
/// directory (`$XDG_RUNTIME_DIR/confab`, else `/tmp/confab-$UID`), wherever the socket is:
/// whoever can write there can send this shell's `ask -C` to a conversation of their choice,
/// so both directories must be this user's alone (mode 0700), or the map is not used.
struct SessionStore {
    let directory: String
    /// Why the directory may not be used; nil when it may.
    let problem: String?

    init(runtimeDirectory: String = ConfabPaths.current().runtimeDirectory) {
        directory = runtimeDirectory + "/sessions"
        var problem: String?
        for path in [runtimeDirectory, directory] {
            do {
                try Files.ensurePrivateDirectory(path)
            } catch {
                problem = error.description
                break
            }
        }
        self.problem = problem
    }

    func conversation(for session: String) -> String? {
        guard problem == nil, let bytes = try? Files.readAll(path: directory + "/" + session, limit: 64) else { return nil }
        let id = String(decoding: bytes, as: UTF8.self).trimmingWhitespace
        return ConversationID.isValid(id) ? id : nil
    }

    /// Best effort: a session that cannot be remembered gets a new conversation next time.
    func remember(_ id: String, for session: String) {
        if let problem {
            Out.error("not remembering this shell's conversation: \(problem)")
            return
        }
        do {
            try Files.writeAtomically(path: directory + "/" + session, bytes: Array((id + "\n").utf8))
        } catch {
            Out.error("cannot remember this shell's conversation in \(directory): \(error)")
        }
    }
}
