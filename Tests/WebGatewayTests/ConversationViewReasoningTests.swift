import ConfabProtocol
import WebGateway
import XCTest

/// A reply's thought on the page: `message.reasoning` pieces grow the `reasoning` of the
/// message event (text as text), thinking until the first text; a page loaded mid-thought
/// gets it from the attach.
final class ConversationViewReasoningTests: XCTestCase {
    let created = Timestamp(milliseconds: 1_700_000_000_000)

    private final class Clock: @unchecked Sendable {
        var now: Timestamp
        init(_ now: Timestamp) { self.now = now }
    }

    func testPiecesGrowTheFoldedThoughtUntilTheTextEndsIt() {
        let clock = Clock(created)
        var view = ConversationView(role: "owner", clock: { clock.now })
        _ = view.load(AttachResult(json: ["messages": [], "clients": []]))
        let reply = Message(id: "m2", conversation: "k3v9q2m8x7ad", role: .assistant, content: "", status: .streaming, created: created)
        XCTAssertNil(view.apply(.messageCreated(reply)).first?["message"]?["reasoning"])
        _ = view.apply(.messageReasoning(message: "m2", content: "<b>first</b>\n"))
        clock.now = Timestamp(milliseconds: created.milliseconds + 12_400)
        var thought = view.apply(.messageReasoning(message: "m2", content: "second")).first?["message"]?["reasoning"]
        XCTAssertEqual(thought?["text"]?.string, "<b>first</b>\nsecond")
        XCTAssertEqual(thought?["html"]?.string, "<p>&lt;b&gt;first&lt;/b&gt;\nsecond</p>\n",
                       "markdown as a reply's is, the model's HTML shown as text")
        XCTAssertEqual(thought?["seconds"]?.int, 12)
        XCTAssertEqual(thought?["thinking"]?.bool, true)

        clock.now = Timestamp(milliseconds: created.milliseconds + 20_000)
        thought = view.apply(.messageDelta(message: "m2", content: "Answer")).first?["message"]?["reasoning"]
        XCTAssertEqual(thought?["thinking"]?.bool, false)
        XCTAssertEqual(thought?["seconds"]?.int, 20)
        clock.now = Timestamp(milliseconds: created.milliseconds + 90_000)
        XCTAssertEqual(view.state["messages"]?.array?.first?["reasoning"]?["seconds"]?.int, 20, "no longer counting")
        // Thinking again after the answer began: the block opens again and its clock goes on
        // from 20 s, the 70 s pause not counted.
        thought = view.apply(.messageReasoning(message: "m2", content: " late")).first?["message"]?["reasoning"]
        XCTAssertEqual(thought?["text"]?.string, "<b>first</b>\nsecond late")
        XCTAssertEqual(thought?["thinking"]?.bool, true)
        XCTAssertEqual(thought?["seconds"]?.int, 20)
        clock.now = Timestamp(milliseconds: created.milliseconds + 95_000)
        thought = view.apply(.messageDelta(message: "m2", content: " more")).first?["message"]?["reasoning"]
        XCTAssertEqual(thought?["thinking"]?.bool, false)
        XCTAssertEqual(thought?["seconds"]?.int, 25)
        XCTAssertTrue(view.apply(.messageReasoning(message: "m9", content: "unknown")).isEmpty)
    }

    func testAPageLoadedMidThoughtShowsItThinkingFromTheDaemonsStart() {
        let clock = Clock(Timestamp(milliseconds: created.milliseconds + 7_000))
        var view = ConversationView(role: "owner", clock: { clock.now })
        var pending = Message(id: "m2", conversation: "k3v9q2m8x7ad", role: .assistant, content: "", status: .streaming, created: created)
        pending.reasoning = Reasoning(text: "so far", started: Timestamp(milliseconds: created.milliseconds + 2_000))
        let state = view.load(AttachResult(json: ["messages": [], "clients": [], "pending": pending.json]))
        let thought = state["messages"]?.array?.first?["reasoning"]
        XCTAssertEqual(thought?["text"]?.string, "so far")
        XCTAssertEqual(thought?["seconds"]?.int, 5)
        XCTAssertEqual(thought?["thinking"]?.bool, true)
    }
}
