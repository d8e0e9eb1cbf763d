import ArgumentParser
import ConfabProtocol
import Posix

/// `confab wait ID`: for scripts (and a `notify-send` of one's own), blocks until the
/// conversation's reply in flight has ended, tool rounds and all, and exits by how it ended,
/// as `ask` does. With no reply in flight it exits at once, by how the last reply ended.
struct Wait: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until a conversation's reply in flight ends; exit by how it ended.",
        discussion: """
            Follows the reply in flight, through its tool calls, without showing it, and exits \
            when it ends: 0 complete, 1 failed, cancelled or interrupted (the reason on standard \
            error), 4 cut off at the length limit (or all of it spent thinking), 5 the owner \
            stopped sharing the conversation with you, as ask's. With no reply in flight it \
            exits at once by how the last reply ended (0 when there is none). When confabd \
            restarts meanwhile, wait waits for it to come back and goes on.
            """)

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: Confab
    @Argument(help: "The conversation (id or unique prefix).", completion: .conversationIDs) var id: String

    func run() throws {
        var connection = try Connection.start(socketPath, command: "wait")
        let conversation = try connection.resolveConversation(id)
        var attached = try Self.attach(connection, conversation)
        guard let first = attached.pending?.id ?? attached.tools.first?.id, let reply = ToolLines.head(first) else {
            // Nothing in flight: how the last reply ended.
            let last = attached.messages.last(where: { $0.role == .assistant && $0.supersededBy == nil })
            throw Failure.exit(try last.map { try Self.status(of: ReplyEnd.of($0), conversation) } ?? 0)
        }
        var follower = ReplyFollower(conversation: conversation, reply: reply)
        for step in follower.resume(stored: attached.messages, pending: attached.pending, tools: attached.tools) {
            if case .finished(let end) = step { throw Failure.exit(try Self.status(of: end, conversation)) }
        }
        while true {
            while let event = connection.nextEvent() {
                switch event {
                case .fatal(let error): throw Failure.rpc(error)
                case .response: break
                case .notification(let notification):
                    for step in follower.take(notification) {
                        if case .finished(let end) = step { throw Failure.exit(try Self.status(of: end, conversation)) }
                    }
                }
            }
            var fds = [BlockingPoll.Watch(fd: connection.fd)]
            do {
                guard try BlockingPoll.wait(&fds, timeoutMilliseconds: -1) else { continue }
            } catch {
                throw Failure.message("poll failed: \(error)")
            }
            if !(try connection.receive()) {
                // What came before the end first: the reply may have ended.
                while let event = connection.nextEvent() {
                    if case .notification(let notification) = event {
                        for step in follower.take(notification) {
                            if case .finished(let end) = step { throw Failure.exit(try Self.status(of: end, conversation)) }
                        }
                    }
                }
                (connection, attached) = try Self.reconnect(socketPath, conversation)
                for step in follower.resume(stored: attached.messages, pending: attached.pending, tools: attached.tools) {
                    if case .finished(let end) = step { throw Failure.exit(try Self.status(of: end, conversation)) }
                }
            }
        }
    }

    /// Attached quietly (following is not joining), with as many messages as a reply of many
    /// tool rounds may have made.
    private static func attach(_ connection: Connection, _ conversation: String) throws(Failure) -> AttachResult {
        AttachResult(json: try connection.call(.conversationAttach, ["conversation": .string(conversation), "history": 200, "quiet": true]))
    }

    /// confabd went away: said once, then tried again every 100 ms, backing off to 1 s.
    private static func reconnect(_ socketPath: String, _ conversation: String) throws(Failure) -> (Connection, AttachResult) {
        Out.error("confabd closed the connection before the reply finished; waiting for it to come back")
        var waitMilliseconds: Int32 = 100
        while true {
            var none: [BlockingPoll.Watch] = []
            _ = try? BlockingPoll.wait(&none, timeoutMilliseconds: waitMilliseconds)
            waitMilliseconds = min(1000, waitMilliseconds * 2)
            do {
                let fresh = try Connection.start(socketPath, command: "wait")
                return (fresh, try attach(fresh, conversation))
            } catch {
                switch error {
                case .unreachable, .disconnected: continue
                case .rpc(let refusal) where refusal.code == RPCError.shuttingDown: continue
                default: throw error
                }
            }
        }
    }

    /// The exit status of a reply that ended so, as `ask`'s; the reason on standard error.
    static func status(of end: ReplyEnd, _ conversation: String) throws(Failure) -> Int32 {
        switch end.outcome {
        case .complete:
            return 0
        case .cutAtLengthLimit:
            Out.error("the reply was cut off at the model's length limit; confab continue \(conversation) goes on with it")
            return AskStream.cutAtLengthLimitStatus
        case .failed(let error) where error?.code == .thinkingExhausted:
            Out.error(Words.replyError(error))
            return AskStream.cutAtLengthLimitStatus
        case .failed(let error):
            throw .message("the reply failed: " + Words.replyError(error))
        case .cancelled(let by):
            throw .message("the reply was cancelled" + (by.map { " by \(Words.clientName($0))" } ?? ""))
        case .interrupted:
            throw .message("the reply was interrupted: confabd stopped before it finished (confab retry \(conversation) asks again)")
        case .conversationDeleted:
            throw .message("the conversation was deleted")
        case .unshared(let by):
            Out.error("the owner\(by.map { " (\(Words.clientName($0)))" } ?? "") stopped sharing the conversation with you")
            return 5
        }
    }
}
