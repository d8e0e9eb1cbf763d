import ConfabProtocol
import XCTest

/// `tool.progress` as the daemon writes it and a client reads it.
final class ToolProgressTests: XCTestCase {
    func testARoundTripKeepsEveryFieldAndLeavesOutWhatIsNotKnown() throws {
        let progress = ToolProgress(message: "m2.1", call: "call_1", tool: "time__slow", progress: 3, total: 10, text: "counting")
        let frame = ServerNotification.conversation("c1", .toolProgress(progress)).frame
        guard case .success(.notification(let method, let params)) = RPC.parse(frame.dropLast()) else { return XCTFail("not a notification") }
        XCTAssertEqual(method, RPCNotification.toolProgress.rawValue)
        XCTAssertEqual(params?["progress"], 3, "a whole number is written as one")
        XCTAssertEqual(ServerNotification(method: method, params: params), .conversation("c1", .toolProgress(progress)))
        XCTAssertEqual(ConversationEvent.toolProgress(progress).messageID, "m2.1")

        let bare = ToolProgress(message: "m2.1", call: "call_1", tool: "t", progress: 0.25)
        let params2 = ServerNotification.conversation("c1", .toolProgress(bare)).params
        XCTAssertNil(params2["total"])
        XCTAssertNil(params2["text"])
        XCTAssertNil(ServerNotification(method: RPCNotification.toolProgress.rawValue, params: ["conversation": "c1", "message": "m2.1"]),
                     "no progress: not a tool.progress")
    }

    func testTheSummaryIsShort() {
        XCTAssertEqual(ToolProgress(message: "m", call: "c", tool: "t", progress: 3, total: 10, text: "counting").summary, "3/10 counting")
        XCTAssertEqual(ToolProgress(message: "m", call: "c", tool: "t", progress: 2.5).summary, "2.5")
        XCTAssertEqual(ToolProgress(message: "m", call: "c", tool: "t", progress: 0.25, total: 1).summary, "0.3/1")
        XCTAssertEqual(ToolProgress(message: "m", call: "c", tool: "t", progress: 7, text: "").summary, "7")
    }
}
