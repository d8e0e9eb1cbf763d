import ConfabProtocol
import ShellIntegration
import Terminal

extension ConversationChoice {
    /// `confab attach` without an id, as `tmux attach` without a target: this shell session's
    /// conversation (`CONFAB_SESSION`, the one `ask -C` and the keys continue) when it still
    /// exists, else the most recently active one. Nothing is made: with no conversation at
    /// all, the error says how to start one.
    static func toAttach(_ connection: Connection) throws(Failure) -> String {
        if let session = Environment.get("CONFAB_SESSION"), ConversationNames.isValidSession(session),
           let id = SessionStore().conversation(for: session), try exists(connection, id) {
            return id
        }
        guard let id = try connection.call(ListCall.self, ListParams(limit: 1)).conversations.first?.id else {
            throw .message("there is no conversation to attach to yet: confab new starts one")
        }
        return id
    }

    private static func exists(_ connection: Connection, _ id: String) throws(Failure) -> Bool {
        do {
            _ = try connection.resolveConversation(id)
            return true
        } catch .message {
            return false
        } catch .rpc(let error) where error.code == RPCError.notFound || error.code == RPCError.invalidParams {
            return false
        }
    }
}

extension AttachSession {
    /// The slash commands `/help` lists, by name.
    static let commandNames: [String] = slashCommands.compactMap(\.names.first)

    /// What Tab offers for the line typed so far: a slash command's name, and after
    /// `/switch ` the conversations whose id or title starts with what follows (several are
    /// listed, with their titles, above the input line).
    func completions(of line: String, conversations: () -> [ConversationInfo]) -> [String] {
        if line.hasPrefix("/"), !line.contains(" ") {
            return Self.commandNames.filter { ("/" + $0).hasPrefix(line) }.map { "/" + $0 + " " }
        }
        if line.hasPrefix("/attach ") { return pathCompletions(of: line) }
        let command = "/switch "
        guard line.hasPrefix(command) else { return [] }
        let typed = line.dropFirst(command.count).drop { $0 == " " }.lowercased()
        let matching = conversations().filter { conversation in
            !conversation.id.isEmpty && (conversation.id.hasPrefix(typed) || conversation.title.lowercased().hasPrefix(typed))
        }
        if matching.count > 1 {
            for conversation in matching.prefix(20) { listCompletion(conversation.id, title: conversation.title) }
            if matching.count > 20 { listCompletion("…", title: "\(matching.count - 20) more: type more of the id or title") }
        }
        return matching.map { command + $0.id + " " }
    }
}
