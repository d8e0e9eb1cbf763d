#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import LineEditor
import Posix
import Terminal

/// Tool calls shown, approved and denied from the input line.
extension AttachSession {
    /// `y` or `n` (either case) alone: an answer to the call waiting for one.
    static func yesOrNo(_ text: String) -> Bool? {
        switch text.trimmingWhitespace.lowercased() {
        case "y": return true
        case "n": return false
        default: return nil
        }
    }

    /// A call waits for a yes: the question, saying how to answer it.
    func askApproval(_ waiting: Waiting) {
        guard !awaitingApproval.contains(where: { $0.call.id == waiting.call.id }) else { return }
        awaitingApproval.append(waiting)
        if sharedRole != nil {
            transcript.toolAwaitingOwner(call: waiting.call.id, name: waiting.call.name, arguments: waiting.call.arguments)
            return
        }
        // `y` and `n` answer the oldest; every call can be answered by its id.
        let id = waiting.call.id
        // A call in a reply another user asked for would run with our secrets: say whose it is.
        let requester = toolMessages.values.first { $0.tool?.callID == id }?.tool?.requestedBy
        let asker = requester.map { "asked by \(Words.person(name: $0.name, login: $0.login)); " } ?? ""
        let how = asker + (awaitingApproval.count == 1 ? "y/n, or /approve \(id), /deny \(id)" : "/approve \(id) or /deny \(id)")
        transcript.toolApprovalRequested(call: waiting.call.id, name: waiting.call.name, arguments: waiting.call.arguments, how: how)
    }

    /// `tool.approve` for `given` (a call id, or the id of the tool message answering it), or
    /// for the oldest call waiting.
    func answer(allow: Bool, call given: String?) throws(Failure) {
        guard sharedRole == nil else {
            transcript.error("only the conversation's owner approves or denies its tool calls")
            return
        }
        var waiting: Waiting
        if let given {
            var callID = given
            if MessageID.order(of: given) != nil {
                guard let known = toolMessages[given]?.tool?.callID else {
                    transcript.error("\(given) is no tool call seen here (give the call's id)")
                    return
                }
                callID = known
            }
            waiting = awaitingApproval.first { $0.call.id == callID }
                ?? Waiting(call: callsSeen[callID] ?? ToolCall(id: callID, name: "?", arguments: ""))
        } else {
            guard let oldest = awaitingApproval.first else {
                transcript.error("no tool call is waiting for approval")
                return
            }
            waiting = oldest
        }
        // Answered as far as we are concerned: `y` again answers the next one.
        awaitingApproval.removeAll { $0.call.id == waiting.call.id }
        let id = try connection.send(ApproveCall.self, ApproveParams(conversation: conversation, call: waiting.call.id, allow: allow))
        outstanding[id] = .approve(waiting)
    }

    /// A call ended: its result under it, and it waits for nobody any more.
    func toolEnded(_ message: Message) {
        if let call = message.tool?.callID { awaitingApproval.removeAll { $0.call.id == call } }
        transcript.toolCompleted(message)
    }

    /// /tool: everything a tool answered; the latest call's without an id.
    func showTool(_ given: String?) throws(Failure) {
        func matches(_ message: Message) -> Bool {
            guard message.role == .tool else { return false }
            guard let given else { return true }
            return message.id == given || message.tool?.callID == given
        }
        let known = given.map { toolMessages[$0] ?? toolMessageOfCall[$0].flatMap { toolMessages[$0] } } ?? newestTool.flatMap { toolMessages[$0] }
        var found = known
        if found == nil {
            // Older than what this screen has seen: the conversation's history has it.
            found = try wholeMessages(connection, conversation).last(where: matches)
        }
        guard let message = found else {
            transcript.error(given.map { "no tool call \($0) in this conversation (give a call id, or a tool message id such as m2.1)" }
                             ?? "no tool was called in this conversation yet")
            return
        }
        transcript.toolDetail(message, arguments: message.tool.flatMap { callsSeen[$0.callID]?.arguments })
    }

    /// /edit-last: your last message in `$EDITOR`; saved changed, it replaces the message and
    /// the replies to it, and is answered again.
    func editLast() throws(Failure) {
        let messages = try wholeMessages(connection, conversation)
        guard let last = messages.last(where: { $0.role == .user && $0.supersededBy == nil }) else {
            transcript.notice("no message to edit")
            return
        }
        let id = last.id
        guard let text = composeInEditor(initial: last.content, command: "/edit-last") else { return }
        if text.isBlank || text == last.content {
            transcript.notice("unchanged: nothing sent")
            return
        }
        outstanding[try connection.send(EditCall.self, EditParams(conversation: conversation, message: id, content: text))] = .revision
    }

    /// `$EDITOR` (else `$VISUAL`, else vi) on an empty file; what it holds after is sent.
    func edit() throws(Failure) {
        guard let text = composeInEditor(initial: "", command: "/edit") else { return }
        if text.isBlank {
            transcript.notice("nothing to send")
        } else {
            try send(text)
        }
    }

    /// The user's editor on a file holding `initial`; what it holds after, or nil when the
    /// editor failed (said on the screen).
    func composeInEditor(initial: String, command: String) -> String? {
        let editor = Environment.get("VISUAL").flatMap { $0.isEmpty ? nil : $0 }
            ?? Environment.get("EDITOR").flatMap { $0.isEmpty ? nil : $0 } ?? "vi"
        let text: String
        // The editor gets the whole terminal, as it was before us, and gives it back.
        let lineEditor = self.editor
        lineEditor?.stop()
        screen?.suspend()
        defer {
            if lineEditor != nil {
                screen?.resume()
                self.editor = LineEditor(prompt: prompt, historyFile: Self.historyFile(), completer: completer)
            }
        }
        do {
            text = try Editor.compose(with: editor, initial: initial)
        } catch {
            transcript.error("\(command): \(error)")
            return nil
        }
        transcript.inputEchoed()
        return text
    }

    /// End of input, every send answered, or /quit: detach and leave.
    func leave() -> Never {
        restoreTerminal()
        _ = try? connection.call(DetachCall.self, ConversationTarget(conversation: conversation))
        Out.exit(0)
    }
}
