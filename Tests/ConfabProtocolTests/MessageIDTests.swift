import XCTest

import ConfabProtocol

final class MessageIDTests: XCTestCase {
    func testIdsOfAToolCallChainReadAsSequenceAndStep() {
        XCTAssertEqual(MessageID.order(of: "m2"), MessageOrder(sequence: 2, step: 0))
        XCTAssertEqual(MessageID.order(of: "m2.1"), MessageOrder(sequence: 2, step: 1))
        XCTAssertEqual(MessageID.order(of: "m12.30"), MessageOrder(sequence: 12, step: 30))
        XCTAssertEqual(MessageID.sequence(of: "m7.3"), 7)
        XCTAssertEqual(MessageID.make(4, step: 0), "m4")
        XCTAssertEqual(MessageID.make(4, step: 2), "m4.2")
        XCTAssertEqual(MessageOrder(sequence: 9, step: 5).id, "m9.5")
    }

    func testAnythingElseIsNotAMessageID() {
        for bad in ["m", "m0", "m01", "m2.", "m2.0", "m2.01", "m.1", "m2.1.1", "m2..1", "m-1", "m2.x", "n2", "M2", "m2 ", " m2",
                    "m1234567890123456", "m1.1234567890123456", "m２"] {
            XCTAssertNil(MessageID.order(of: bad), bad)
            XCTAssertNil(MessageID.sequence(of: bad), bad)
        }
    }

    func testOrderIsSequenceThenStep() {
        let ids = ["m3", "m2.10", "m2", "m10", "m2.2", "m1"]
        XCTAssertEqual(ids.sorted { MessageID.order(of: $0)! < MessageID.order(of: $1)! }, ["m1", "m2", "m2.2", "m2.10", "m3", "m10"])
    }

    func testToolMessagesAndToolCallsRoundTripThroughJSON() throws {
        let call = ToolCall(id: "call_1", name: "weather", arguments: #"{"city":"Paris"}"#)
        let asking = Message(id: "m2", conversation: "c", role: .assistant, content: "", status: .complete, created: .now(),
                             finishReason: "tool_calls", toolCalls: [call])
        XCTAssertEqual(Message(json: asking.json), asking)
        XCTAssertEqual(asking.json["tool_calls"]?.array?.first?["arguments"]?.string, #"{"city":"Paris"}"#)
        let result = Message(id: "m2.1", conversation: "c", role: .tool, content: "{\"temp\":21}", status: .complete, created: .now(),
                             tool: ToolResult(callID: "call_1", name: "weather", httpStatus: 200, durationMilliseconds: 84,
                                              approval: .approved, truncated: true))
        let json = result.json
        XCTAssertEqual(json["tool_call_id"]?.string, "call_1")
        XCTAssertEqual(json["name"]?.string, "weather")
        XCTAssertEqual(json["http_status"]?.int, 200)
        XCTAssertEqual(json["duration_ms"]?.int, 84)
        XCTAssertEqual(json["approval"]?.string, "approved")
        XCTAssertEqual(json["truncated"]?.bool, true)
        XCTAssertEqual(Message(json: json), result)
        // A user message has no tool fields even if someone writes them.
        var user = Message(id: "m1", conversation: "c", role: .user, content: "hi", status: .complete, created: .now()).json.object!
        user["tool_call_id"] = "x"
        XCTAssertNil(Message(json: .object(user))?.tool)
    }
}
