import ConfabProtocol
import Posix
import ShellIntegration
import Terminal

/// `/attach`, `/detach` and the files they keep for the next message.
extension AttachSession {
    enum UploadOutcome {
        /// No files were pending.
        case nothing
        /// `message.send`'s `attachments`.
        case uploaded([AttachmentRef])
        /// The daemon refused one; said already, and the message is not sent.
        case refused
    }

    /// `/attach PATH…` reads and checks the files now (so a problem is said at once) and
    /// keeps them for the next message; `/attach` alone lists them.
    func attachFiles(_ argument: String) {
        guard !argument.isEmpty else {
            listPendingFiles()
            return
        }
        guard let words = CommandWords.split(argument), !words.isEmpty else {
            transcript.error("/attach: a quote is not closed (a path with spaces goes in quotes, or with a backslash before each space)")
            return
        }
        let files: [FileAttachment]
        do throws(AttachmentProblem) {
            files = try FileAttachment.readAll(words.map(Self.expandingHome), alreadyPending: pendingFiles, regularOnly: true)
        } catch {
            transcript.error(error.description + (pendingFiles.isEmpty ? "" : " (the files attached before stay: /attach lists them)"))
            return
        }
        pendingFiles += files
        for file in files { transcript.notice("attached " + file.summary) }
        transcript.notice("the next message you send carries " + Words.count(pendingFiles.count, "file") + " (/detach drops them)")
    }

    func listPendingFiles() {
        guard !pendingFiles.isEmpty else {
            transcript.notice("no files attached: /attach PATH adds one to the next message")
            return
        }
        transcript.notice("the next message carries " + Words.count(pendingFiles.count, "file") + ":")
        for (index, file) in pendingFiles.enumerated() { transcript.notice("\(index + 1). " + file.summary) }
    }

    /// `/detach`: the next message carries nothing.
    func detachFiles() {
        guard !pendingFiles.isEmpty else {
            transcript.notice("no files were attached")
            return
        }
        transcript.notice("dropped " + Words.count(pendingFiles.count, "attached file"))
        pendingFiles = []
    }

    /// Stores the pending files with the daemon, for the message about to be sent.
    func uploadPendingFiles() throws(Failure) -> UploadOutcome {
        guard !pendingFiles.isEmpty else { return .nothing }
        do throws(Failure) {
            return .uploaded(try AttachmentRef.upload(pendingFiles, over: connection))
        } catch {
            switch error {
            case .message(let text): transcript.error("not sent: \(text); the files stay attached (/detach drops them)")
            case .rpc(let refusal): transcript.error("not sent: \(refusal.message); the files stay attached (/detach drops them)")
            default: throw error
            }
            return .refused
        }
    }

    /// A send answered: its files are stored with the message, or pending again when it was refused.
    func settleFiles(of request: Int, _ result: Result<JSON, RPCError>) {
        guard let files = filesInFlight.removeValue(forKey: request) else { return }
        if case .failure = result {
            pendingFiles = files + pendingFiles
            transcript.notice(Words.count(files.count, "file") + " still attached for the next message (/detach drops them)")
        }
    }

    /// confabd went away before answering sends with files: whether they were stored is not
    /// known, so they are attached again, and the person decides (/detach drops them).
    func keepFilesOfUnansweredSends() {
        let files = filesInFlight.keys.sorted().flatMap { filesInFlight[$0] ?? [] }
        filesInFlight = [:]
        guard !files.isEmpty else { return }
        pendingFiles = files + pendingFiles
        transcript.notice(Words.count(files.count, "file") + " attached again in case that message was lost: /attach lists them, /detach drops them")
    }

    /// `~` and `~/…` are the home directory, as in a shell; nothing else is expanded.
    static func expandingHome(_ path: String) -> String {
        guard path == "~" || path.hasPrefix("~/"), let home = Environment.get("HOME"), !home.isEmpty else { return path }
        return home + path.dropFirst()
    }

    /// Tab after `/attach `: the paths the word being typed may become, a directory with a
    /// slash after it (to go on into it), a file with a space; several are listed above the
    /// input line. Names starting with a dot only when the word does.
    func pathCompletions(of line: String) -> [String] {
        let (start, typed) = CommandWords.lastWord(line)
        let slash = typed.lastIndex(of: "/")
        let directoryTyped = slash.map { String(typed[...$0]) } ?? ""
        let prefix = slash.map { String(typed[typed.index(after: $0)...]) } ?? typed
        let directory = directoryTyped.isEmpty ? "." : Self.expandingHome(directoryTyped)
        guard let names = try? Files.names(in: directory) else { return [] }
        let matching = names.filter { $0.hasPrefix(prefix) && (prefix.hasPrefix(".") || !$0.hasPrefix(".")) }.sorted()
        guard !matching.isEmpty else { return [] }
        let statuses = Files.statuses(of: matching, in: directory)
        let head = String(line[..<start])
        if matching.count > 1 {
            for name in matching.prefix(20) { transcript.notice(name) }
            if matching.count > 20 { transcript.notice("… and \(matching.count - 20) more: type more of the name") }
        }
        return zip(matching, statuses).map { name, status in
            head + CommandWords.escaped(directoryTyped + name) + (status?.kind == .directory ? "/" : " ")
        }
    }
}
