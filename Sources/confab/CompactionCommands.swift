import ArgumentParser
import ConfabProtocol
import Terminal

struct Compact: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Summarise a conversation so far: its next replies are sent the summary instead of the messages it covers.",
        discussion: "Every message stays in the history, show, export and search; `confab uncompact ID` undoes it. "
            + "Prints the summary once it is stored.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String
    @Option(help: "What the summary should keep above all.") var focus: String?

    func run() throws {
        let connection = try Connection.start(socketPath, command: "compact")
        let conversation = try connection.resolveConversation(id)
        let result = try connection.call(CompactCall.self, CompactParams(conversation: conversation, focus: focus))
        guard let compaction = result.compaction else { return }
        Out.stdout(SafeText.sanitized(compaction.summary) + "\n" + compaction.line + "\n")
    }
}

struct Uncompact: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "uncompact",
        abstract: "Undo a conversation's summary: its next replies are sent every message again.")

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String

    func run() throws {
        let connection = try Connection.start(socketPath, command: "uncompact")
        let conversation = try connection.resolveConversation(id)
        let result = try connection.call(UncompactCall.self, ConversationTarget(conversation: conversation))
        if let undone = result.uncompacted { Out.stdout("the summary of \(undone.first)…\(undone.last) is undone\n") }
    }
}

/// The summary in force of a conversation, for `show` and `export` (nil when none).
func compactionInForce(_ connection: Connection, _ conversation: String) throws(Failure) -> Compaction? {
    try connection.call(HistoryCall.self, HistoryParams(conversation: conversation, before: nil, limit: 1)).compaction
}

/// /compact, /summary, /uncompact and the notifications of a summary.
extension AttachSession {
    func compactCommand(_ name: String, _ argument: String) throws(Failure) {
        switch name {
        case "compact":
            let params = CompactParams(conversation: conversation, focus: argument.isEmpty ? nil : argument)
            outstanding[try connection.send(CompactCall.self, params)] = .revision
        case "uncompact":
            outstanding[try connection.send(UncompactCall.self, ConversationTarget(conversation: conversation))] = .revision
        default:
            guard let compaction else {
                return transcript.notice("no summary is in force: /compact [focus] writes one")
            }
            transcript.thought(compaction.summary, header: "summary of \(compaction.first)…\(compaction.last) by \(compaction.model)"
                + " (\(Compaction.grouped(compaction.tokens)) tokens)" + (compaction.focus.map { ", focus: \($0)" } ?? ""))
        }
    }

    /// What a screen shows of a summary's job; false for other events.
    func compactionEvent(_ event: ConversationEvent) -> Bool {
        switch event {
        case .compactionStarted(let by, let automatic):
            transcript.news(automatic ? "the conversation is being summarised before the reply (compact_at)"
                            : "the conversation is being summarised" + (by.map { " (asked by \(name(of: $0)))" } ?? ""))
        case .compactionDelta:
            break
        case .compactionCompleted(let done):
            compaction = done
            transcript.whenFree(done.line) { [transcript] in transcript.rule(done.line) }
        case .compactionFailed(let error, let by):
            transcript.news(error.map { "the summary failed: \(Words.replyError($0)); nothing changed" }
                            ?? "the summary was cancelled" + (by.map { " by \(name(of: $0))" } ?? "") + "; nothing changed")
        case .compactionUndone(let undone, let by):
            if compaction?.last == undone.last { compaction = nil }
            transcript.news("the summary of \(undone.first)…\(undone.last) is undone" + (by.map { " by \(name(of: $0))" } ?? " (a message inside it was edited)")
                + ": the model is sent every message again")
        default:
            return false
        }
        return true
    }
}
