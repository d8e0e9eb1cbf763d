import XCTest

@testable import Broker
import ConfabProtocol

/// How a reply's chain behaves (cancel while its tools run, regenerate, continue), tested
/// against the broker in this process: a real log store, a scripted upstream, no processes.
final class ReplyChainTests: XCTestCase {
    private var b: InProcessBroker!

    override func setUpWithError() throws {
        b = try InProcessBroker()
    }

    override func tearDown() {
        b?.close()
        b = nil
    }

    private func conversation(profile: String? = nil) throws -> String {
        var params: [String: JSON] = [:]
        if let profile { params["profile"] = .string(profile) }
        let created = try b.call(.conversationCreate, .object(params))
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try b.call(.conversationAttach, ["conversation": .string(id)])
        return id
    }

    /// The stream the reply asked for, once it has asked.
    private func stream(_ number: Int) throws -> ScriptedUpstream.Stream {
        b.turn(until: { b.upstream.streams.count > number })
        return try XCTUnwrap(b.upstream.streams.count > number ? b.upstream.streams[number] : nil, "no request for stream \(number)")
    }

    /// Waits for the `message.completed` of `id`.
    @discardableResult
    private func completed(_ id: String) throws -> JSON {
        b.turn(until: { b.notifications(.messageCompleted).contains { $0["message"]?["id"]?.string == id } })
        return try XCTUnwrap(b.notifications(.messageCompleted).last { $0["message"]?["id"]?.string == id }?["message"],
                             "no message.completed for \(id)")
    }

    private func history(_ id: String) throws -> [JSON] {
        try XCTUnwrap(b.call(.conversationHistory, ["conversation": .string(id)])["messages"]?.array)
    }

    func testCancelWhileToolsRunStopsTheCallsAndClosesTheChainOnce() throws {
        let id = try conversation(profile: "tools")
        let sent = try b.call(.messageSend, ["conversation": .string(id), "content": "look it up"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try stream(0).finish("tool_calls", toolCalls: [ToolCall(id: "call_1", name: InProcessBroker.toolName, arguments: "{}")])
        b.turn(until: { !b.upstream.toolCalls.isEmpty })
        let toolCall = try XCTUnwrap(b.upstream.toolCalls.first, "the tool was not called")

        let cancelled = try b.call(.generationCancel, ["conversation": .string(id), "message": .string(reply)])
        XCTAssertNotNil(cancelled["cancelled"]?.string, "a reply running tools can be cancelled")
        XCTAssertTrue(toolCall.call.isCancelled, "the call in flight is aborted")
        let callEnding = try XCTUnwrap(b.waitFor(.toolCompleted)?["message"])
        XCTAssertEqual(callEnding["status"]?.string, MessageStatus.cancelled.rawValue)
        b.turn(until: { b.notifications(.messageCompleted).contains { $0["message"]?["status"]?.string == MessageStatus.cancelled.rawValue } })
        let closing = try XCTUnwrap(b.notifications(.messageCompleted).last?["message"])
        XCTAssertEqual(closing["status"]?.string, MessageStatus.cancelled.rawValue, "an empty turn closes the chain as cancelled")

        XCTAssertNil(b.broker.conversations[id]?.active, "the reply left its conversation")
        XCTAssertEqual(b.broker.replies.activeReplies, 0, "its stream is free")
        XCTAssertEqual(b.upstream.streams.count, 1, "no further turn was asked for")
        XCTAssertEqual(b.notifications(.generationCancelled).count, 1)
        // A second cancel finds nothing to stop.
        XCTAssertEqual(try b.call(.generationCancel, ["conversation": .string(id)])["cancelled"], .null)
    }

    func testCancelNamingAnotherChainStopsNothing() throws {
        let id = try conversation()
        try b.call(.messageSend, ["conversation": .string(id), "content": "hello"])
        let first = try stream(0)
        first.send("partial")
        let cancelled = try b.call(.generationCancel, ["conversation": .string(id), "message": "m9"])
        XCTAssertEqual(cancelled["cancelled"], .null)
        XCTAssertFalse(first.call.isCancelled)
        XCTAssertTrue(b.notifications(.generationCancelled).isEmpty)
        first.finish()
        XCTAssertEqual(try completed("m2")["content"]?.string, "partial")
    }

    func testRegenerateAsksAgainWithoutTheReplyItReplaces() throws {
        let id = try conversation()
        try b.call(.messageSend, ["conversation": .string(id), "content": "hello"])
        let first = try stream(0)
        first.send("first answer")
        first.finish()
        try completed("m2")

        let regenerated = try b.call(.messageRegenerate, ["conversation": .string(id)])
        let replacement = try XCTUnwrap(regenerated["reply"]?.string)
        XCTAssertEqual(regenerated["replaces"]?.string, "m2")
        let second = try stream(1)
        XCTAssertFalse(second.request.messages.contains { $0.content == "first answer" }, "the replaced reply is not in the context")
        XCTAssertEqual(second.request.messages.last?.content, "hello")
        second.send("second answer")
        second.finish()
        try completed(replacement)

        let messages = try history(id)
        XCTAssertEqual(messages.last?["content"]?.string, "second answer")
        XCTAssertEqual(messages.first { $0["id"]?.string == "m2" }?["superseded_by"]?.string, replacement)
        XCTAssertNil(b.broker.conversations[id]?.active)
    }

    func testContinueAppendsToAReplyCutForLength() throws {
        let id = try conversation()
        try b.call(.messageSend, ["conversation": .string(id), "content": "count"])
        let first = try stream(0)
        first.send("one")
        first.finish("length")
        try completed("m2")

        let continued = try b.call(.messageContinue, ["conversation": .string(id)])
        XCTAssertEqual(continued["reply"]?.string, "m2", "a continuation keeps the reply's id")
        let second = try stream(1)
        XCTAssertEqual(second.request.continuing, "one", "the request carries the text so far")
        second.send(" two")
        second.finish("stop")
        b.turn(until: { b.notifications(.messageCompleted).count >= 2 })
        let ending = try XCTUnwrap(b.notifications(.messageCompleted).last?["message"])
        XCTAssertEqual(ending["content"]?.string, "one two")
        XCTAssertEqual(ending["finish_reason"]?.string, "stop")
        XCTAssertEqual(try history(id).last?["content"]?.string, "one two")
    }
}
