import XCTest

@testable import Broker
import ConfabProtocol
import Upstream

/// What the model is sent of a conversation whose replies called tools.
final class ToolContextTests: XCTestCase {
    private func message(_ id: String, _ role: Role, _ content: String, status: MessageStatus = .complete,
                         calls: [ToolCall]? = nil, answering call: String? = nil, supersededBy: String? = nil) -> Message {
        Message(id: id, conversation: "c", role: role, content: content, status: status, created: .now(), supersededBy: supersededBy,
                toolCalls: calls, tool: call.map { ToolResult(callID: $0, name: "weather") })
    }

    private let calls = [ToolCall(id: "a", name: "weather", arguments: "{}"), ToolCall(id: "b", name: "weather", arguments: "{}")]

    func testAChainGoesAsAssistantCallsThenOneResultEachThenTheNextTurn() {
        let messages = [
            message("m1", .user, "weather?"),
            message("m2", .assistant, "", calls: calls),
            message("m2.1", .tool, "sunny", answering: "a"),
            message("m2.2", .tool, "Error: timed out", status: .failed, answering: "b"),
            message("m2.3", .assistant, "Sunny."),
            message("m3", .user, "thanks"),
        ]
        let context = Conversation.context(of: messages, system: "be brief", before: "m4")
        XCTAssertEqual(context.map(\.role), [.system, .user, .assistant, .tool, .tool, .assistant, .user])
        XCTAssertEqual(context[2].toolCalls, calls)
        XCTAssertEqual(context[3].toolCallID, "a")
        XCTAssertFalse(context[3].isError)
        XCTAssertEqual(context[4].toolCallID, "b")
        XCTAssertTrue(context[4].isError)
        // The next turn of the same reply sees the chain so far, and not what comes after it.
        let midway = Conversation.context(of: messages, system: nil, before: "m2.3")
        XCTAssertEqual(midway.map(\.role), [.user, .assistant, .tool, .tool])
    }

    func testCallsWithoutAStoredResultAreGivenAsNotMade() {
        // A crash between the turn and its results, then a new question.
        let messages = [
            message("m1", .user, "weather?"),
            message("m2", .assistant, "Let me look.", calls: calls),
            message("m2.2", .tool, "rain", answering: "b"),
            message("m3", .user, "well?"),
        ]
        let context = Conversation.context(of: messages, system: nil, before: "m4")
        XCTAssertEqual(context.map(\.role), [.user, .assistant, .tool, .tool, .user])
        XCTAssertEqual(context.map(\.toolCallID), [nil, nil, "a", "b", nil])
        XCTAssertTrue(context[2].isError)
        XCTAssertTrue(context[2].content.contains("not made"))
        XCTAssertEqual(context[3].content, "rain")
        // A turn that ended asking (over the round limit) with nothing after it.
        let limited = Conversation.context(of: Array(messages.prefix(2)), system: nil, before: "m3")
        XCTAssertEqual(limited.map(\.toolCallID), [nil, nil, "a", "b"])
    }

    func testResultsThatAnswerNoCallAndSupersededChainsAreLeftOut() {
        let messages = [
            message("m1", .user, "weather?"),
            message("m2", .assistant, "", calls: calls, supersededBy: "m3"),
            message("m2.1", .tool, "sunny", answering: "a", supersededBy: "m3"),
            message("m2.2", .tool, "rain", answering: "b", supersededBy: "m3"),
            message("m3", .assistant, "I cannot say."),
            message("m3.1", .tool, "stray", answering: "zzz"),
        ]
        let context = Conversation.context(of: messages, system: nil, before: "m4")
        XCTAssertEqual(context.map(\.role), [.user, .assistant])
        XCTAssertEqual(context[1].content, "I cannot say.")
        XCTAssertTrue(context[1].toolCalls.isEmpty)
    }

    func testATurnThatAskedIsNeverJoinedWithTheTurnAfterIt() {
        // The closing turn of a cancelled chain is empty and follows the results.
        let messages = [
            message("m1", .user, "go"),
            message("m2", .assistant, "", calls: [calls[0]]),
            message("m2.1", .tool, "The call was cancelled", status: .cancelled, answering: "a"),
            message("m2.2", .assistant, "", status: .cancelled),
            message("m3", .user, "again"),
        ]
        let context = Conversation.context(of: messages, system: nil, before: "m4")
        XCTAssertEqual(context.map(\.role), [.user, .assistant, .tool, .assistant, .user])
        XCTAssertEqual(context[1].toolCalls.count, 1)
        XCTAssertTrue(context[3].toolCalls.isEmpty)
    }
}
