import ConfabProtocol
import Foundation
import XCTest

/// The real confabd against the fake upstream: queueing and context as the upstream receives them,
/// usage estimated where it sends none. Fan-out, late attach, disconnects, cancelling and the
/// conversation methods are `InProcessStreamingTests` (BrokerTests).
final class StreamingTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testAReplyWithNoTextLeavesTheContextAlternatingUserAndAssistant() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        // A reply that failed before any text (or was cancelled before its first delta) is sent
        // back as an empty assistant turn: left out, it would put two user turns in a row, which
        // chat APIs refuse or misread.
        let failed = try client.call("message.send", ["conversation": .string(id), "content": "first [[status:400]]"])
        let (_, failedFinal) = try client.awaitReply(try XCTUnwrap(failed["reply"]?.string))
        XCTAssertEqual(failedFinal["status"]?.string, "failed")
        let asked = try client.call("message.send", ["conversation": .string(id), "content": "[[context]] second"])
        let (_, final) = try client.awaitReply(try XCTUnwrap(asked["reply"]?.string))
        XCTAssertEqual(final["content"]?.string, "context: user assistant user | first [[status:400]] /  / [[context]] second")
        let messages = try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(messages.compactMap { $0["role"]?.string }, ["user", "assistant", "user"])
        XCTAssertEqual(messages[1]["content"]?.string, "")
    }

    /// llama.cpp's server sends no usage even when asked: the reply then carries an estimate,
    /// marked `estimated`, so token totals still work. Reported usage is never marked.
    func testAReplyWithoutUsageFromTheUpstreamGetsAnEstimateMarkedAsSuch() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let content = "[[reply:hello there]] [[no-usage]]"
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        let usage = try XCTUnwrap(try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final["usage"])
        XCTAssertEqual(usage["estimated"]?.bool, true)
        XCTAssertEqual(usage["completion_tokens"]?.int, 3)
        XCTAssertEqual(usage["prompt_tokens"]?.int, 3 + 4 + (content.utf8.count + 3) / 4)
        XCTAssertEqual(usage["total_tokens"]?.int, (usage["prompt_tokens"]?.int ?? 0) + 3)

        let reported = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:hi]]"])
        let real = try XCTUnwrap(try client.awaitReply(try XCTUnwrap(reported["reply"]?.string)).final["usage"])
        XCTAssertNil(real["estimated"])
        XCTAssertNotNil(real["total_tokens"]?.int)
    }

    func testSendsQueueInOrderAndContextCarriesEarlierTurns() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client, system: "You are terse.")
        try client.call("conversation.attach", ["conversation": .string(id)])
        let first = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:one]] [[delay:20]]"])
        let second = try client.call("message.send", ["conversation": .string(id), "content": "[[context]]"])
        XCTAssertEqual(first["reply"]?.string, "m2")
        XCTAssertEqual(second["message"]?["id"]?.string, "m3")
        XCTAssertEqual(second["reply"]?.string, "m4")
        let (_, firstFinal) = try client.awaitReply("m2")
        XCTAssertEqual(firstFinal["content"]?.string, "one")
        let (_, secondFinal) = try client.awaitReply("m4")
        let text = try XCTUnwrap(secondFinal["content"]?.string)
        XCTAssertTrue(text.hasPrefix("context: system user assistant user |"), text)
        XCTAssertTrue(text.contains("You are terse."), text)
        XCTAssertTrue(text.contains(" / one / "), text)
        // What went upstream: streaming, usage requested, the conversation's model.
        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 2)
        let body = try XCTUnwrap(requests.last?["body"])
        XCTAssertEqual(body["stream"], .bool(true))
        XCTAssertEqual(body["stream_options"]?["include_usage"], .bool(true))
        XCTAssertEqual(body["model"]?.string, "fake-model")
        XCTAssertEqual(body["messages"]?.array?.count, 4)
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.compactMap { $0["id"]?.string }, ["m1", "m2", "m3", "m4"])
    }
}
