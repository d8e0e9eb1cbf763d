#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ConfabProtocol
import LineEditor
import Posix
import Terminal

/// confabd went away and comes back: the session waits, then catches up.
extension AttachSession {
    /// The connection ended (confabd stopped, restarted or crashed): say so, wait for it to
    /// come back while the person may still leave (Ctrl-D, /quit), then attach again and show
    /// what was missed: the rest of the replies we followed and every message newer than the
    /// newest seen here.
    func reconnect() throws(Failure) {
        let why = stoppingReason.map { "confabd stopped (\($0))" } ?? "confabd closed the connection"
        stoppingReason = nil
        transcript.notice("\(why); waiting for it to come back (Ctrl-D leaves)")
        // Requests it never answered may or may not have been done: a message says so.
        if outstanding.values.contains(where: { if case .send = $0 { true } else { false } }) {
            transcript.error("a message you sent was not answered before confabd went away: it may not have been stored")
        }
        keepFilesOfUnansweredSends()
        outstanding = [:]
        awaitingApproval = []
        var waitMilliseconds: Int32 = 100
        while true {
            transcript.flush()
            var fds: [BlockingPoll.Watch] = []
            // The line editor still takes keys (Ctrl-D leaves); lines piped in wait in their pipe.
            let watchKeys = inputOpen && editor != nil
            if watchKeys { fds.append(BlockingPoll.Watch(fd: 0)) }
            let signalIndex = fds.count
            if let signals { fds.append(BlockingPoll.Watch(fd: signals)) }
            let woke: Bool
            do {
                woke = try BlockingPoll.wait(&fds, timeoutMilliseconds: waitMilliseconds)
            } catch {
                throw .message("poll failed: \(error)")
            }
            if woke {
                if signals != nil, fds[signalIndex].ready {
                    for signal in SignalPipe.drain() {
                        if signal == SIGINT { editor?.clearLine() }
                        if signal == SIGWINCH { screen?.resized(); transcript.resized(); editor?.resized() }
                    }
                }
                if watchKeys, fds[0].ready { readWhileAway() }
            }
            waitMilliseconds = min(1000, waitMilliseconds * 2)
            let fresh: Connection
            do {
                fresh = try Connection.open(path: socketPath)
                let me = try fresh.hello(command: "attach", name: requestedName)
                let result = try fresh.call(AttachCall.self, AttachParams(conversation: conversation, history: 200))
                connection = fresh
                myClientID = me.clientID
                caughtUp(result)
                return
            } catch {
                switch error {
                case .unreachable, .disconnected: continue
                case .rpc(let refusal) where refusal.code == RPCError.notFound:
                    transcript.notice("the conversation is gone")
                    throw .exit(0)
                case .rpc(let refusal) where refusal.code == RPCError.shuttingDown: continue
                default: throw error
                }
            }
        }
    }

    /// Keys while confabd is away: lines are not sent (said so), Ctrl-D leaves.
    func readWhileAway() {
        for input in editor?.readKey() ?? [] {
            switch input {
            case .line: transcript.error("not sent: confabd is not connected yet")
            case .end: leave()
            }
        }
    }

    /// Attached again after a reconnection: what happened while we were away.
    func caughtUp(_ result: AttachResult) {
        present = [:]
        for client in result.clients { present[client.id] = client }
        let missedAfter = newestSeen
        let followed = Set(followers.keys)
        // Messages newer than any seen here, of no reply we followed.
        let missed = result.messages.filter { message in
            (missedAfter.map { message.order > $0 } ?? true) && !followed.contains(message.sequence)
        }
        transcript.notice("confabd is back" + (missed.isEmpty ? "" : ": \(Words.count(missed.count, "message")) while away"))
        // The replies we followed: the rest of their text and how they ended.
        for sequence in followed.sorted() {
            guard var follower = followers[sequence] else { continue }
            let progress = follower.resume(stored: result.messages, pending: result.pending, tools: result.tools)
            followers[sequence] = follower
            for step in progress { show(step, of: sequence) }
        }
        if !missed.isEmpty { showHistory(missed, newest: result.pending == nil) }
        followInFlight(result)
        for message in result.messages { note(message) }
    }
}
