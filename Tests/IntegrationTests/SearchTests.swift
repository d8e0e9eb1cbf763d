import ConfabProtocol
import Foundation
import XCTest

/// `conversation.search` and `confab search` against the real daemon.
final class SearchTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    private func send(_ client: RPCClient, _ id: String, _ text: String) throws {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
    }

    func testFindsMessagesAcrossConversationsNewestFirstWithTitlesAndSnippets() throws {
        let client = try harness.client()
        let first = try harness.createConversation(client, title: "database")
        let second = try harness.createConversation(client, title: "kitchen")
        try client.call("conversation.attach", ["conversation": .string(first)])
        try client.call("conversation.attach", ["conversation": .string(second)])
        try send(client, first, "how do I tune the Write-Ahead Log? [[reply:Set wal_level and checkpoints.]]")
        try send(client, second, "a recipe [[reply:Bread: flour, water, salt. Nothing about a write-ahead log.]]")
        try send(client, first, "[[reply:unrelated]] thanks")

        let hits = try XCTUnwrap(client.call("conversation.search", ["query": "write-ahead LOG"])["hits"]?.array)
        XCTAssertEqual(hits.map { "\($0["conversation"]?.string == second ? "kitchen" : "database") \($0["message"]?.string ?? "") \($0["role"]?.string ?? "")" },
                       ["kitchen m2 assistant", "kitchen m1 user", "database m1 user"], "the fake's directives are in the questions too")
        XCTAssertEqual(hits.first?["title"]?.string, "kitchen")
        let snippet = try XCTUnwrap(hits.first?["snippet"]?.string)
        XCTAssertTrue(snippet.hasPrefix("…ad: flour") && snippet.hasSuffix("Nothing about a write-ahead log."), snippet)
        XCTAssertNotNil(hits.first?["created"]?.string.flatMap(Timestamp.init(rfc3339:)))

        // Every word, in any order.
        let words = try XCTUnwrap(client.call("conversation.search", ["query": "checkpoints WAL_LEVEL"])["hits"]?.array)
        XCTAssertEqual(words.compactMap { $0["message"]?.string }, ["m2", "m1"])
        // One conversation, and a limit.
        let scoped = try XCTUnwrap(client.call("conversation.search", ["query": "log", "conversation": .string(first)])["hits"]?.array)
        XCTAssertEqual(Set(scoped.compactMap { $0["conversation"]?.string }), [first])
        XCTAssertEqual(try client.call("conversation.search", ["query": "a", "limit": 1])["hits"]?.array?.count, 1)
        XCTAssertEqual(try client.call("conversation.search", ["query": "nowhere to be found"])["hits"]?.array, [])

        // A deleted conversation's messages are gone from the results.
        try client.call("conversation.delete", ["conversation": .string(second)])
        let afterDelete = try XCTUnwrap(client.call("conversation.search", ["query": "write-ahead log"])["hits"]?.array)
        XCTAssertEqual(afterDelete.compactMap { $0["conversation"]?.string }, [first])

        // Found from the logs alone after a restart, conversations unread.
        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let again = try harness.client()
        let restored = try XCTUnwrap(again.call("conversation.search", ["query": "Write-Ahead"])["hits"]?.array)
        XCTAssertEqual(restored.compactMap { $0["message"]?.string }, ["m1"])
        XCTAssertEqual(restored.first?["title"]?.string, "database")
    }

    /// A search runs off the loop: while one is stuck inside the kernel (a log swapped for a
    /// FIFO nobody writes, see `SearchBlocker`), a reply streams on to an attached client, and
    /// the search's answer comes later, in request order with the searching client's other answers.
    func testARepliesKeepStreamingWhileSearchesRun() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        for n in 1...20 {
            try send(client, id, "filler message number \(n) [[reply:filler reply \(n)]]")
        }
        let watcher = try harness.client(name: "watcher")
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let stuck = try SearchBlocker(harness: harness, client: client)
        try client.sendRaw(RPC.request(id: "search", method: RPCMethod.conversationSearch.rawValue, params: ["query": "filler"]))
        try client.sendRaw(RPC.request(id: "status", method: RPCMethod.status.rawValue, params: [:]))
        try stuck.waitUntilASearchIsStuck()

        // Another client starts a reply; the watcher gets its deltas while the search cannot end.
        let sender = try harness.client(name: "sender")
        let sent = try sender.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": "[[words:30]] [[delay:5]] [[hold:20 searched]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        var whileSearching: [String] = []
        while whileSearching.count < 10 {
            let notes = try watcher.collect(until: { method, params in
                method == RPCNotification.messageDelta.rawValue && params["message"]?.string == reply
            })
            whileSearching += RPCClient.deltas(notes, for: reply)
        }
        try stuck.waitUntilASearchIsStuck()  // still stuck: those deltas came during the search

        stuck.letGo()
        let answers = [try client.response(to: "search", timeout: 30), try client.response(to: "status", timeout: 30)]
        XCTAssertEqual(answers[0]["result"]?["hits"]?.array?.count, 40, answers[0].text)
        XCTAssertNotNil(answers[1]["result"]?["streams"], "the status answer follows the search's")
        try harness.releaseUpstream("searched")
        let (notes, final) = try watcher.awaitReply(reply)
        XCTAssertEqual((whileSearching + RPCClient.deltas(notes, for: reply)).joined(), final["content"]?.string)
        XCTAssertEqual(final["status"]?.string, "complete")
    }
}

/// The conversation object's `usage`: totals over its replies, the same live, listed from the
/// index after a restart, and in `confab ls -l`.
final class UsageTotalsTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testTotalsAddUpLiveAndAfterARestartAndShowInTheLongListing() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client, title: "counted")
        try client.call("conversation.attach", ["conversation": .string(id)])
        var expected = (prompt: 0, completion: 0, total: 0)
        var estimated = false
        for text in ["[[reply:one two three]]", "[[reply:four]] [[no-usage]]"] {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
            let final = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
            let usage = try XCTUnwrap(final["usage"])
            expected.prompt += usage["prompt_tokens"]?.int ?? 0
            expected.completion += usage["completion_tokens"]?.int ?? 0
            expected.total += usage["total_tokens"]?.int ?? 0
            estimated = estimated || usage["estimated"]?.bool == true
        }
        XCTAssertTrue(estimated, "the second reply's usage is estimated")
        func totals(_ client: RPCClient) throws -> JSON? {
            try client.call("conversation.get", ["conversation": .string(id)])["conversation"]?["usage"]
        }
        let live = try XCTUnwrap(totals(client))
        XCTAssertEqual(live["prompt_tokens"]?.int, expected.prompt)
        XCTAssertEqual(live["completion_tokens"]?.int, expected.completion)
        XCTAssertEqual(live["total_tokens"]?.int, expected.total)
        XCTAssertEqual(live["estimated"]?.bool, true)
        let empty = try harness.createConversation(client, title: "nothing yet")
        XCTAssertEqual(try client.call("conversation.get", ["conversation": .string(empty)])["conversation"]?["usage"]?["total_tokens"]?.int, 0)

        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        XCTAssertEqual(try totals(harness.client()), live, "from the index, the log unread")

        let listed = try harness.runClient(["ls", "-l"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.first?.contains("PROVIDER  TOKENS") == true, listed.stdout)
        let row = try XCTUnwrap(lines.first { $0.hasPrefix(id) })
        XCTAssertTrue(row.contains("default") && row.contains("~\(expected.total)  counted"), row)
        let none = try XCTUnwrap(lines.first { $0.hasPrefix(empty) })
        XCTAssertTrue(none.contains(" -  nothing yet"), none)
    }
}
