import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Promises of docs/protocol.md and docs/reliability.md that no other test held the daemon to.
final class PromiseTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    private func attached(_ client: RPCClient, title: String = "test") throws -> String {
        let id = try harness.createConversation(client, title: title)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    // MARK: - The send result comes first

    /// Read frame by frame: the response to `message.send` reaches the sender before its own
    /// `message.created` for the stored message and before anything of the reply. Twenty sends,
    /// each reply streaming at once, so that a broadcast sent ahead of the result would show.
    func testTheSendResultComesBeforeTheSendersOwnCreatedAndAnyDelta() throws {
        harness = try Harness()
        let client = try harness.client()
        let id = try attached(client)
        for n in 1...20 {
            let requestID = JSON.string("send-\(n)")
            try client.sendRaw(RPC.request(id: requestID, method: RPCMethod.messageSend.rawValue,
                                           params: ["conversation": .string(id), "content": .string("[[reply:answer \(n)]] [[chunk:1]] [[delay:0]]")]))
            var before: [JSON] = []
            var result: JSON?
            while result == nil {
                let frame = try XCTUnwrap(try client.readFrame())
                if frame["id"] == requestID { result = frame["result"] } else { before.append(frame) }
            }
            let message = try XCTUnwrap(result?["message"]?["id"]?.string)
            let reply = try XCTUnwrap(result?["reply"]?.string)
            for frame in before {
                let params = frame["params"] ?? .null
                XCTAssertFalse(frame["method"]?.string == RPCNotification.messageCreated.rawValue
                               && [message, reply].contains(params["message"]?["id"]?.string ?? ""), "send \(n): \(frame.text)")
                XCTAssertFalse(frame["method"]?.string == RPCNotification.messageDelta.rawValue && params["message"]?.string == reply,
                               "send \(n): \(frame.text)")
            }
            // The harness holds every test to the same order (RPCClient.precedes).
            XCTAssertTrue(RPCClient.precedes(["result": result!], RPCNotification.messageCreated.rawValue,
                                             ["conversation": .string(id), "message": ["id": .string(message)]]))
            let final = try client.awaitReply(reply).final
            XCTAssertEqual(final["content"]?.string, "answer \(n)")
        }
    }

    /// The harness's own check: a `response(to:)` that comes after a notification it must
    /// precede throws, so every integration test that sends holds the daemon to the order.
    func testTheHarnessRefusesAResponseThatComesAfterItsOwnNotifications() throws {
        let (ours, theirs) = try socketPair()
        defer { close(theirs) }
        let client = RPCClient(adopting: ours)
        defer { client.close() }
        let frames = [#"{"jsonrpc":"2.0","method":"message.delta","params":{"conversation":"c","message":"m2","content":"x"}}"#,
                      #"{"jsonrpc":"2.0","id":1,"result":{"message":{"id":"m1","conversation":"c"},"reply":"m2"}}"#]
        let bytes = Array((frames.joined(separator: "\n") + "\n").utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { send(theirs, $0.baseAddress, $0.count, 0) }, bytes.count)
        XCTAssertThrowsError(try client.response(to: .int(1))) { error in
            XCTAssertTrue("\(error)".contains("arrived before the response"), "\(error)")
        }
        // Another message (m3), or the same ids in another conversation, may come first.
        let allowed = [#"{"jsonrpc":"2.0","method":"message.created","params":{"conversation":"c","message":{"id":"m3"}}}"#,
                       #"{"jsonrpc":"2.0","method":"message.created","params":{"conversation":"d","message":{"id":"m4"}}}"#,
                       #"{"jsonrpc":"2.0","method":"message.delta","params":{"conversation":"d","message":"m5","content":"x"}}"#,
                       #"{"jsonrpc":"2.0","id":2,"result":{"message":{"id":"m4","conversation":"c"},"reply":"m5"}}"#]
        let more = Array((allowed.joined(separator: "\n") + "\n").utf8)
        XCTAssertEqual(more.withUnsafeBytes { send(theirs, $0.baseAddress, $0.count, 0) }, more.count)
        XCTAssertEqual(try client.response(to: .int(2))["result"]?["reply"]?.string, "m5")
        XCTAssertEqual(client.notificationsBeforeLastResponse.map(\.method), ["message.created", "message.created", "message.delta"])
    }

    private func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw HarnessError(description: "socketpair: \(errno)") }
        return (fds[0], fds[1])
    }

    // MARK: - Retry delays

    /// `message.retrying` announces the wait the daemon chose: Retry-After capped at 300 s, else
    /// 1 s for the first retry. Cancelled during the wait, so nothing here waits for it.
    func testRetryingAnnouncesTheDelayRetryAfterCappedElseOneSecond() throws {
        harness = try Harness(retries: 3)
        let client = try harness.client()
        let id = try attached(client)
        let cases: [(content: String, delay: Int)] = [
            ("[[status:503]] [[retry-after:1000]] capped", 300_000),
            ("[[status:429]] [[retry-after:12]] as asked", 12_000),
            ("[[status:503]] [[no-retry-after]] backoff", 1_000),
            ("[[status:429]] [[retry-after:soon]] not seconds", 1_000),
        ]
        for (content, delay) in cases {
            let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": .string(content)])
            let reply = try XCTUnwrap(sent["reply"]?.string)
            let retrying = try XCTUnwrap(client.collect(until: { method, _ in method == RPCNotification.messageRetrying.rawValue }).last)
            XCTAssertEqual(retrying.params["message"]?.string, reply, content)
            XCTAssertEqual(retrying.params["attempt"]?.int, 1, content)
            XCTAssertEqual(retrying.params["delay_ms"]?.int, delay, content)
            XCTAssertEqual(try client.call(RPCMethod.generationCancel.rawValue, ["conversation": .string(id)])["cancelled"]?.string, reply)
            XCTAssertEqual(try client.awaitReply(reply).final["status"]?.string, MessageStatus.cancelled.rawValue)
        }
        XCTAssertEqual(harness.upstreamRequests().count, cases.count, "one request each: no retry ran")
        XCTAssertTrue(harness.log().contains("retrying in 300000 ms"), harness.log())
    }

    // MARK: - Delete stops the reply

    func testDeletingAConversationStopsItsReplyInFlight() throws {
        harness = try Harness()
        let client = try harness.client()
        let id = try attached(client)
        let sent = try client.call(RPCMethod.messageSend.rawValue,
                                   ["conversation": .string(id), "content": "[[words:50]] [[hold:3 deleted]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitUntilUpstreamHolds("deleted")
        _ = try client.collect(until: { method, params in method == RPCNotification.messageDelta.rawValue && params["message"]?.string == reply })
        XCTAssertEqual(try client.call(RPCMethod.status.rawValue)["streams"]?.int, 1)

        XCTAssertEqual(try client.call(RPCMethod.conversationDelete.rawValue, ["conversation": .string(id)])["deleted"]?.string, id)
        // Notifications queued while a response is owed follow it.
        let afterDelete = try client.collect(until: { method, _ in method == RPCNotification.conversationDeleted.rawValue })
        XCTAssertFalse(afterDelete.contains { $0.method == RPCNotification.messageCompleted.rawValue || $0.method == RPCNotification.messageFailed.rawValue },
                       "a deleted conversation's reply is stopped, not ended: \(afterDelete.map(\.method))")
        // The daemon let go of the upstream: the fake sees its client leave while it holds.
        let deadline = Date().addingTimeInterval(30)
        while try harness.upstreamHTTP("GET", "/holds")["holding"]?.array?.contains("deleted") == true {
            XCTAssertLessThan(Date(), deadline, "the upstream request is still open after the delete")
            if Date() > deadline { break }
            usleep(10_000)
        }
        let status = try client.call(RPCMethod.status.rawValue)
        XCTAssertEqual(status["streams"]?.int, 0, status.text)
        XCTAssertEqual(status["queued"]?.int, 0, status.text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: harness.dataDirectory + "/conversations/\(id).jsonl"))
        // Released now, the old request has nobody to write to; the daemon serves on.
        try harness.releaseUpstream("deleted")
        let other = try attached(client)
        let again = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(other), "content": "[[reply:still here]]"])
        let (notes, final) = try client.awaitReply(try XCTUnwrap(again["reply"]?.string))
        XCTAssertEqual(final["content"]?.string, "still here")
        XCTAssertFalse(notes.contains { $0.params["conversation"]?.string == id }, "nothing more of the deleted conversation")
        XCTAssertEqual(harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/chat/completions") == true }.count, 2)
    }

    // MARK: - Searches at shutdown

    /// A search that cannot end (one log is a FIFO nobody writes: the search's open waits in
    /// the kernel), two more waiting behind it, then SIGTERM: all three are answered -32005,
    /// and once the stuck read is let go the daemon exits 0.
    func testSearchesStillWaitingAtShutdownAreAnsweredThatTheDaemonIsStopping() throws {
        harness = try Harness()
        let client = try harness.client()
        let stuck = try SearchBlocker(harness: harness, client: client)
        for n in 1...3 {
            try client.sendRaw(RPC.request(id: .string("search-\(n)"), method: RPCMethod.conversationSearch.rawValue, params: ["query": "anything"]))
        }
        try stuck.waitUntilASearchIsStuck()
        let daemon = try XCTUnwrap(harness.daemon)
        daemon.signal(SIGTERM)
        var answered: [String: Int] = [:]
        while answered.count < 3 {
            let frame = try XCTUnwrap(try client.readFrame(timeout: 30), "answers so far: \(answered)")
            if let id = frame["id"]?.string { answered[id] = frame["error"]?["code"]?.int ?? 0 }
        }
        XCTAssertEqual(answered, ["search-1": RPCError.shuttingDown, "search-2": RPCError.shuttingDown, "search-3": RPCError.shuttingDown])
        stuck.letGo()
        XCTAssertEqual(daemon.wait(seconds: 30), 0, harness.log())
    }

    // MARK: - Too many open files

    /// With its descriptors used up (RLIMIT_NOFILE lowered on the running daemon with
    /// `prlimit --pid`), a create is refused with -32003 naming the cause, and the daemon serves
    /// on: the connection that was refused still works, and a descriptor freed is used again.
    func testTooManyOpenFilesRefusesACreateWith32003AndTheDaemonServesOn() throws {
        let prlimit = "/usr/bin/prlimit"
        guard FileManager.default.isExecutableFile(atPath: prlimit) else { throw unavailable("\(prlimit) (util-linux) is not installed") }
        harness = try Harness()
        let client = try harness.client()
        let kept = try attached(client, title: "kept")
        let pid = try XCTUnwrap(harness.daemon?.pid)
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        let limit = open + 4
        // The soft limit only: the hard one could not be raised again without CAP_SYS_RESOURCE.
        let set = DiskFullTests.run([prlimit, "--pid", String(pid), "--nofile=\(limit):"])
        XCTAssertEqual(set.status, 0, set.output)

        var created: [String] = []
        var refusal: JSON?
        for n in 1...50 where refusal == nil {
            let frame = try client.request(RPCMethod.conversationCreate.rawValue, ["title": .string("filler \(n)")])
            if let error = frame["error"] { refusal = error } else if let id = frame["result"]?["conversation"]?["id"]?.string { created.append(id) }
        }
        let error = try XCTUnwrap(refusal, "no refusal within 50 creates at \(limit) descriptors")
        XCTAssertEqual(error["code"]?.int, RPCError.storageFailed, error.text)
        XCTAssertTrue(error["message"]?.string?.contains("Too many open files") == true, error.text)
        XCTAssertLessThanOrEqual(created.count, 4)

        // Serving on: the same connection, a reply in a conversation that was there, a create
        // once a delete gave a descriptor back.
        XCTAssertNotNil(try client.call(RPCMethod.status.rawValue)["conversations"])
        XCTAssertEqual(try client.call(RPCMethod.conversationGet.rawValue, ["conversation": .string(kept)])["conversation"]?["title"]?.string, "kept")
        if let last = created.last {
            try client.call(RPCMethod.conversationDelete.rawValue, ["conversation": .string(last)])
            XCTAssertNoThrow(try client.call(RPCMethod.conversationCreate.rawValue, ["title": "again"]))
        }
        let restored = DiskFullTests.run([prlimit, "--pid", String(pid), "--nofile=\(limit + 64):"])
        XCTAssertEqual(restored.status, 0, restored.output)
        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(kept), "content": "[[reply:served]]"])
        XCTAssertEqual(try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final["content"]?.string, "served")
        XCTAssertTrue(harness.log().contains("Too many open files"), harness.log())
    }
}

/// Makes a conversation search stop inside the kernel until the test lets it go: a new
/// conversation's log is swapped for a FIFO, which a search's open(2) waits on for a writer.
final class SearchBlocker {
    let fifo: String
    let daemonPID: Int32

    init(harness: Harness, client: RPCClient) throws {
        let id = try harness.createConversation(client, title: "blocker")
        fifo = harness.dataDirectory + "/conversations/\(id).jsonl"
        daemonPID = try XCTUnwrap(harness.daemon?.pid)
        // The daemon keeps writing to its open descriptor of the old file; searches open the path.
        guard rename(fifo, fifo + ".moved") == 0, mkfifo(fifo, 0o600) == 0 else {
            throw HarnessError(description: "cannot swap \(fifo) for a FIFO: \(String(cString: strerror(errno)))")
        }
    }

    /// Waits until a thread of the daemon waits in open(2) for the FIFO's writer.
    func waitUntilASearchIsStuck(timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemonPID)/task")) ?? []
            for task in tasks {
                let wchan = (try? String(contentsOfFile: "/proc/\(daemonPID)/task/\(task)/wchan", encoding: .utf8)) ?? ""
                if wchan.hasPrefix("wait_for_partner") { return }
            }
            usleep(5_000)
        }
        throw HarnessError(description: "no search waited on \(fifo) within \(timeout)s")
    }

    /// Opens and closes the writing end: the search reads an empty log and goes on.
    func letGo() {
        let fd = open(fifo, O_WRONLY | O_NONBLOCK)
        if fd >= 0 { close(fd) }
    }
}
