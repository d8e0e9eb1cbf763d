import XCTest

@testable import Broker
import ConfabProtocol
import Tools

/// What each call of a turn becomes before anything is stored or sent: numbered under its
/// reply, refused when no tool has its name or its arguments fail the check, waiting for a yes
/// when its tool wants one or someone other than the owner asked. No loop: values in and out.
final class ToolCallPlanTests: XCTestCase {
    /// A source whose tools take `{}` only; nothing is ever started.
    private final class Fixed: ToolSource {
        var kind: ToolSourceKind { .http }
        func serves(_ entry: QualifiedToolName) -> Bool { true }
        func offered(for entries: [QualifiedToolName]?, includingUnready: Bool) -> [OfferedTool] { [] }
        func validate(_ tool: OfferedTool, arguments: String) -> Result<JSON, ToolArgumentError> {
            arguments == "{}" ? .success([:]) : .failure(ToolArgumentError(message: "arguments must be {}"))
        }
        func start(_ tool: OfferedTool, arguments: JSON, as call: ToolCallContext,
                   progress: @escaping (ToolCallProgress) -> Void, done: @escaping (ToolCallEnding) -> Void) -> any ToolCallHandle {
            fatalError("a plan starts nothing")
        }
    }

    private let source = Fixed()
    private let owner = Author(uid: 1000, login: "ana", name: "Ana", clientID: "c1")
    private let guest = Author(uid: 1001, login: "bo", name: "Bo", clientID: "c2")
    private let created = Timestamp.now()

    private func tool(_ name: String, approval: ToolApproval = .never) -> OfferedTool {
        var tool = OfferedTool(space: nil, tool: name, description: name, parameters: ["type": "object"], approval: approval, source: source, detail: name)
        tool.name = name
        return tool
    }

    private func plan(_ calls: [ToolCall], offered: [OfferedTool], by author: Author? = nil) -> [PlannedToolCall] {
        PlannedToolCall.plan(calls, offered: offered, requestedBy: author ?? owner, ownUID: 1000, conversation: "k1", chain: 3, firstStep: 2,
                             created: created)
    }

    func testCallsAreNumberedUnderTheReplyAndKeepTheirArguments() {
        let calls = [ToolCall(id: "a", name: "lookup", arguments: "{}"), ToolCall(id: "b", name: "lookup", arguments: "{}")]
        let planned = plan(calls, offered: [tool("lookup")])
        XCTAssertEqual(planned.map(\.message.id), ["m3.2", "m3.3"])
        XCTAssertEqual(planned.map(\.message.role), [.tool, .tool])
        XCTAssertEqual(planned.map(\.message.status), [.streaming, .streaming])
        XCTAssertEqual(planned.map(\.message.conversation), ["k1", "k1"])
        XCTAssertEqual(planned.map { $0.message.tool?.callID }, ["a", "b"])
        XCTAssertEqual(planned.map(\.arguments), [[:], [:]])
        XCTAssertEqual(planned.map { $0.refusal == nil }, [true, true])
        XCTAssertEqual(planned.map(\.waitsForApproval), [false, false])
        XCTAssertNil(planned[0].message.tool?.requestedBy, "the owner's own reply names no requester")
    }

    func testACallOfNoOfferedToolIsRefusedNamingThoseThereAre() {
        let call = ToolCall(id: "a", name: "nothing", arguments: "{}")
        let named = plan([call], offered: [tool("lookup"), tool("weather")])[0]
        XCTAssertNil(named.tool)
        XCTAssertNil(named.arguments)
        XCTAssertEqual(named.refusal, MessageError(code: .toolUnavailable, message: #"there is no tool "nothing" here; the tools are: lookup, weather"#))
        XCTAssertEqual(plan([call], offered: [])[0].refusal, MessageError(code: .toolUnavailable, message: #"there is no tool "nothing" here"#))
        XCTAssertFalse(named.waitsForApproval, "a refused call asks nobody")
    }

    func testArgumentsThatFailTheCheckAreRefusedAndAskNobody() {
        let planned = plan([ToolCall(id: "a", name: "lookup", arguments: #"{"x":1}"#)], offered: [tool("lookup", approval: .always)])[0]
        XCTAssertNil(planned.arguments)
        XCTAssertEqual(planned.refusal, MessageError(code: .toolArguments, message: "arguments must be {}"))
        XCTAssertFalse(planned.waitsForApproval)
    }

    func testAToolThatWantsAYesOrAnotherUsersReplyWaitsForTheOwner() {
        let call = ToolCall(id: "a", name: "lookup", arguments: "{}")
        XCTAssertTrue(plan([call], offered: [tool("lookup", approval: .always)])[0].waitsForApproval)
        let asked = plan([call], offered: [tool("lookup")], by: guest)[0]
        XCTAssertTrue(asked.waitsForApproval, "another user's reply spends the owner's secrets only with a yes")
        XCTAssertEqual(asked.message.tool?.requestedBy, guest)
        let linked = Author(uid: 1000, login: "ana", name: "Ana", clientID: "c3", link: "l1")
        XCTAssertTrue(plan([call], offered: [tool("lookup")], by: linked)[0].waitsForApproval, "a share link holder is not the owner")
        XCTAssertFalse(plan([call], offered: [tool("lookup")], by: owner)[0].waitsForApproval)
    }
}
