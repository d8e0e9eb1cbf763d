import ConfabProtocol
import Foundation
import XCTest

/// Regenerate, edit, continue and fork against the real daemon and the fake upstream: what
/// attached clients are told, what the next request's context holds, and what a restart keeps.
final class RevisionTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    private func contents(_ messages: JSON?) -> [String] { messages?.array?.compactMap { $0["content"]?.string } ?? [] }

    /// The `messages` of the last request the fake upstream received, as "role: content".
    private func lastContext() throws -> [String] {
        try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array).map {
            "\($0["role"]?.string ?? ""): \($0["content"]?.string ?? "")"
        }
    }

    private func expectError(_ code: Int, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            try body()
            XCTFail("expected error \(code)", file: file, line: line)
        } catch let error as RPCError {
            XCTAssertEqual(error.code, code, error.message, file: file, line: line)
            return error.message
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
        return ""
    }

    func testRegenerateSupersedesTheReplyTellsEveryoneAndLeavesItOutOfLaterContext() throws {
        let client = try harness.client()
        let watcher = try harness.client(name: "watcher")
        let id = try harness.createConversation(client, system: "be brief")
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "first [[reply:old answer]]"])
        _ = try watcher.awaitReply(try XCTUnwrap(sent["reply"]?.string))

        let regenerated = try client.call("message.regenerate", ["conversation": .string(id)])
        XCTAssertEqual(regenerated["replaces"]?.string, "m2")
        let newID = try XCTUnwrap(regenerated["reply"]?.string)
        XCTAssertEqual(newID, "m3")
        let (notes, final) = try watcher.awaitReply(newID)
        let superseded = try XCTUnwrap(notes.first { $0.method == "message.superseded" })
        XCTAssertEqual(superseded.params["message"]?.string, "m2")
        XCTAssertEqual(superseded.params["by"]?.string, "m3")
        XCTAssertEqual(final["status"]?.string, "complete")
        // The regenerated reply answered the same question, without the old answer.
        XCTAssertEqual(try lastContext(), ["system: be brief", "user: first [[reply:old answer]]"])

        let next = try client.call("message.send", ["conversation": .string(id), "content": "[[context]]"])
        let answer = try watcher.awaitReply(try XCTUnwrap(next["reply"]?.string)).final
        XCTAssertEqual(next["message"]?["id"]?.string, "m4")
        XCTAssertEqual(answer["content"]?.string,
                       "context: system user assistant user | be brief / first [[reply:old answer]] / old answer / [[context]]")
        // The old reply stays in the history, marked, before and after a restart.
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?[1]["superseded_by"]?.string, "m3")
        XCTAssertEqual(contents(history["messages"]).prefix(3), ["first [[reply:old answer]]", "old answer", "old answer"])
        client.close()
        watcher.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let again = try harness.client()
        let restored = try again.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(restored["messages"]?.array, history["messages"]?.array)
        try again.call("conversation.attach", ["conversation": .string(id)])
        let after = try again.call("message.send", ["conversation": .string(id), "content": "[[context]]"])
        _ = try again.awaitReply(try XCTUnwrap(after["reply"]?.string))
        let context = try lastContext()
        XCTAssertEqual(context.count, 6, "system, first, the regenerated answer, two more turns, the new one: \(context)")
    }

    /// A regenerate that was stored and never started (the daemon was killed first) runs after the restart.
    func testARegeneratedReplyOwedAtACrashRunsAfterTheRestart() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:once]]"])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        // Killed right after storing a regenerate, before its reply started: the record is
        // written by hand, as the daemon would have written it.
        harness.killDaemon()
        let log = harness.dataDirectory + "/conversations/\(id).jsonl"
        let record = #"{"at":"2026-11-24T10:00:00.000Z","by":"m3","message":"m2","type":"superseded","v":1}"#
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: log))
        handle.seekToEndOfFile()
        handle.write(Data((record + "\n").utf8))
        try handle.close()
        try harness.startDaemon()
        let again = try harness.client()
        try again.call("conversation.attach", ["conversation": .string(id)])
        var history: [JSON] = []
        let deadline = Date().addingTimeInterval(10)
        repeat {
            history = try again.call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
            if history.count == 3, history[2]["status"]?.string == "complete" { break }
            usleep(50_000)
        } while Date() < deadline
        XCTAssertEqual(history.compactMap { $0["id"]?.string }, ["m1", "m2", "m3"])
        XCTAssertEqual(history.last?["content"]?.string, "once")
        XCTAssertEqual(history[1]["superseded_by"]?.string, "m3")
    }

    func testEditingTheLastMessageSupersedesItAndItsReplyAndEditingAnOlderOneIsRefused() throws {
        let client = try harness.client()
        let watcher = try harness.client(name: "watcher")
        let id = try harness.createConversation(client)
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        for text in ["one [[reply:r1]]", "two [[reply:r2]]"] {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
            _ = try watcher.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        }
        let refused = expectError(RPCError.conflict) {
            try client.call("message.edit", ["conversation": .string(id), "message": "m1", "content": "uno"])
        }
        XCTAssertTrue(refused.contains("fork"), refused)
        _ = expectError(RPCError.invalidParams) {
            try client.call("message.edit", ["conversation": .string(id), "message": "m2", "content": "not mine"])
        }
        _ = expectError(RPCError.notFound) {
            try client.call("message.edit", ["conversation": .string(id), "message": "m99", "content": "x"])
        }
        _ = expectError(RPCError.invalidParams) {
            try client.call("message.edit", ["conversation": .string(id), "message": "bad", "content": "x"])
        }

        let edited = try client.call("message.edit", ["conversation": .string(id), "message": "m3", "content": "TWO [[context]]"])
        XCTAssertEqual(edited["message"]?["id"]?.string, "m5")
        XCTAssertEqual(edited["replaces"]?.string, "m3")
        let replyID = try XCTUnwrap(edited["reply"]?.string)
        XCTAssertEqual(replyID, "m6")
        let (notes, final) = try watcher.awaitReply(replyID)
        let superseded = notes.filter { $0.method == "message.superseded" }.map { "\($0.params["message"]?.string ?? "")>\($0.params["by"]?.string ?? "")" }
        XCTAssertEqual(superseded, ["m3>m5", "m4>m5"])
        XCTAssertTrue(notes.contains { $0.method == "message.created" && $0.params["message"]?["id"]?.string == "m5" })
        XCTAssertEqual(final["content"]?.string, "context: user assistant user | one [[reply:r1]] / r1 / TWO [[context]]")

        // Kept across a restart: the superseded pair stays out of the context.
        client.close()
        watcher.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let again = try harness.client()
        let history = try again.call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
        XCTAssertEqual(history.map { $0["superseded_by"]?.string ?? "-" }, ["-", "-", "m5", "m5", "-", "-"])
        try again.call("conversation.attach", ["conversation": .string(id)])
        let next = try again.call("message.send", ["conversation": .string(id), "content": "[[context]]"])
        let answer = try again.awaitReply(try XCTUnwrap(next["reply"]?.string)).final
        XCTAssertEqual(answer["content"]?.string,
                       "context: user assistant user assistant user | one [[reply:r1]] / r1 / TWO [[context]] / \(final["content"]?.string ?? "") / [[context]]")
    }

    func testContinueAppendsToAReplyCutOffForLength() throws {
        let client = try harness.client()
        let watcher = try harness.client(name: "watcher")
        let id = try harness.createConversation(client)
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:The beginning]] [[finish:length]]"])
        let cut = try watcher.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
        XCTAssertEqual(cut["finish_reason"]?.string, "length")

        let continued = try client.call("message.continue", ["conversation": .string(id)])
        XCTAssertEqual(continued["reply"]?.string, "m2")
        let (notes, final) = try watcher.awaitReply("m2")
        let announced = try XCTUnwrap(notes.first { $0.method == "message.continued" })
        XCTAssertEqual(announced.params["message"]?["content"]?.string, "The beginning")
        XCTAssertEqual(announced.params["message"]?["status"]?.string, "streaming")
        let appended = RPCClient.deltas(notes, for: "m2").joined()
        XCTAssertTrue(appended.hasPrefix("You said: Continue your last answer"), appended)
        XCTAssertEqual(final["content"]?.string, "The beginning" + appended)
        XCTAssertEqual(final["finish_reason"]?.string, "stop")
        // What the upstream saw: the cut-off reply as the assistant's turn, then the instruction.
        let context = try lastContext()
        XCTAssertEqual(context.suffix(2), ["assistant: The beginning", "user: \(try XCTUnwrap(context.last?.dropFirst(6)))"])
        XCTAssertTrue(context.last?.contains("Continue your last answer") == true)
        // Usage adds up both requests.
        XCTAssertGreaterThan(final["usage"]?["completion_tokens"]?.int ?? 0, cut["usage"]?["completion_tokens"]?.int ?? 0)
        let history = try client.call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
        XCTAssertEqual(history.count, 2)
        XCTAssertEqual(history.last?["content"], final["content"])
        XCTAssertEqual(try client.call("conversation.get", ["conversation": .string(id)])["conversation"]?["message_count"]?.int, 2)

        // Not again: the reply now ended normally.
        let message = expectError(RPCError.conflict) { try client.call("message.continue", ["conversation": .string(id)]) }
        XCTAssertTrue(message.contains("length"), message)

        client.close()
        watcher.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let restored = try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array
        XCTAssertEqual(restored?.last?["content"], final["content"])
        XCTAssertEqual(restored?.count, 2)
    }

    func testForkCopiesTheHistoryUpToAMessageWithNewIdsAndAnswersATrailingQuestion() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client, title: "origin", system: "sys")
        try client.call("conversation.attach", ["conversation": .string(id)])
        for text in ["one [[reply:r1]]", "two [[reply:r2]]"] {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
            _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        }
        let whole = try client.call("conversation.fork", ["conversation": .string(id)])["conversation"]
        let wholeID = try XCTUnwrap(whole?["id"]?.string)
        XCTAssertNotEqual(wholeID, id)
        XCTAssertEqual(whole?["title"]?.string, "fork of origin")
        XCTAssertEqual(whole?["system"]?.string, "sys")
        XCTAssertEqual(whole?["forked_from"]?["conversation"]?.string, id)
        XCTAssertEqual(whole?["forked_from"]?["message"]?.string, "m4")
        XCTAssertEqual(whole?["message_count"]?.int, 4)
        let copied = try client.call("conversation.history", ["conversation": .string(wholeID)])["messages"]?.array ?? []
        XCTAssertEqual(copied.compactMap { $0["id"]?.string }, ["m1", "m2", "m3", "m4"])
        XCTAssertEqual(copied.compactMap { $0["conversation"]?.string }, Array(repeating: wholeID, count: 4))
        XCTAssertEqual(contents(.array(copied)), ["one [[reply:r1]]", "r1", "two [[reply:r2]]", "r2"])

        // At a user message: the copy ends with it, and it is answered in the fork.
        let partial = try client.call("conversation.fork", ["conversation": .string(id), "at": "m3", "title": "branch"])
        let partialID = try XCTUnwrap(partial["conversation"]?["id"]?.string)
        XCTAssertEqual(partial["conversation"]?["title"]?.string, "branch")
        XCTAssertEqual(partial["reply"]?.string, "m4")
        // The fork's reply starts before anyone can attach to it: wait for it in the history.
        var answered: JSON?
        let deadline = Date().addingTimeInterval(10)
        repeat {
            let last = try client.call("conversation.history", ["conversation": .string(partialID)])["messages"]?.array?.last
            if last?["id"]?.string == "m4", last?["status"]?.string == "complete" { answered = last }
            if answered == nil { usleep(20_000) }
        } while answered == nil && Date() < deadline
        XCTAssertEqual(answered?["conversation"]?.string, partialID)
        XCTAssertEqual(answered?["content"]?.string, "r2")

        _ = expectError(RPCError.notFound) { try client.call("conversation.fork", ["conversation": .string(id), "at": "m40"]) }
        _ = expectError(RPCError.invalidParams) { try client.call("conversation.fork", ["conversation": .string(id), "at": "x1"]) }
        let empty = try harness.createConversation(client)
        _ = expectError(RPCError.conflict) { try client.call("conversation.fork", ["conversation": .string(empty)]) }

        // The fork and where it came from survive a restart (the index keeps `forked_from` too).
        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let again = try harness.client()
        let listed = try again.call("conversation.list")["conversations"]?.array ?? []
        let restored = try XCTUnwrap(listed.first { $0["id"]?.string == wholeID })
        XCTAssertEqual(restored["forked_from"], whole?["forked_from"])
        XCTAssertEqual(try again.call("conversation.history", ["conversation": .string(wholeID)])["messages"]?.array, copied)
    }

    /// Sends whose replies are still queued or in flight are copied without them: the fork
    /// holds them one after another, and its one reply answers them all, sent as one user turn.
    func testAForkOfSendsWaitingForRepliesAnswersThemAsOneTurn() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let texts = ["first [[hold:0 fork-queue]]", "second [[reply:two]]", "third [[reply:three]]"]
        var replies: [String] = []
        for text in texts {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
            replies.append(try XCTUnwrap(sent["reply"]?.string))
        }
        XCTAssertEqual(replies, ["m2", "m4", "m6"])
        try harness.waitUntilUpstreamHolds("fork-queue")
        let fork = try client.call("conversation.fork", ["conversation": .string(id)])
        let forkID = try XCTUnwrap(fork["conversation"]?["id"]?.string)
        XCTAssertEqual(fork["reply"]?.string, "m4", "one reply, after the three copied sends")
        try harness.releaseUpstream("fork-queue")
        for reply in replies { _ = try client.awaitReply(reply) }

        var copied: [JSON] = []
        let deadline = Date().addingTimeInterval(30)
        repeat {
            copied = try client.call("conversation.history", ["conversation": .string(forkID)])["messages"]?.array ?? []
            if copied.last?["status"]?.string != "complete" { usleep(20_000) }
        } while copied.last?["status"]?.string != "complete" && Date() < deadline
        XCTAssertEqual(copied.compactMap { $0["id"]?.string }, ["m1", "m2", "m3", "m4"])
        XCTAssertEqual(copied.compactMap { $0["role"]?.string }, ["user", "user", "user", "assistant"])
        XCTAssertEqual(contents(.array(copied)), texts + ["three"])
        // What the fork's reply answered: the three sends joined by blank lines, one user turn.
        let joined = texts.joined(separator: "\n\n")
        let asked = harness.upstreamRequests().compactMap { $0["body"]?["messages"]?.array }.filter {
            $0.contains { $0["content"]?.string?.contains("third") == true }
        }
        XCTAssertEqual(asked.filter { $0.count == 1 }.map { $0.compactMap { $0["content"]?.string } }, [[joined]])
        XCTAssertEqual(asked.filter { $0.count == 1 }.first?.first?["role"]?.string, "user")
    }
}

/// A continuation that does not finish leaves the reply as it was: still cut off for length
/// (so it can be continued again), with the usage it had, and `confab continue` prints none
/// of the old text.
final class ContinuationFailureTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testAFailedContinuationKeepsTheReplyContinuableWithItsUsage() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:The beginning]] [[finish:length]]"])
        let cut = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
        let usage = try XCTUnwrap(cut["usage"])

        harness.fake?.stop()
        let failed = try harness.runClient(["continue", id])
        XCTAssertEqual(failed.status, 1)
        XCTAssertEqual(failed.stdout, "", "nothing of the old text is printed again")
        XCTAssertTrue(failed.stderr.contains("the reply failed"), failed.stderr)

        let stored = try XCTUnwrap(client.call("conversation.history", ["conversation": .string(id)])["messages"]?.array?.last)
        XCTAssertEqual(stored["status"]?.string, "failed")
        XCTAssertEqual(stored["content"]?.string, "The beginning")
        XCTAssertEqual(stored["finish_reason"]?.string, "length")
        XCTAssertEqual(stored["usage"], usage)
        XCTAssertEqual(try client.call("message.continue", ["conversation": .string(id)])["reply"]?.string, "m2", "still continuable")
    }
}
