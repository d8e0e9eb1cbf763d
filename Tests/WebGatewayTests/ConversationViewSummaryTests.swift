import ConfabProtocol
import WebGateway
import XCTest

/// The summary in force on the page: in the state after an attach, sent when one is stored,
/// gone when undone; its text as text, its line without the terminal's commands.
final class ConversationViewSummaryTests: XCTestCase {
    func testTheSummaryIsInTheStateAndFollowsItsEvents() {
        var view = ConversationView(role: "owner")
        let summary = Compaction(first: "m1", last: "m40", summary: "<b>Decided</b> on tabs.", model: "m",
                                 usage: Usage(promptTokens: 9000, completionTokens: 1234, totalTokens: 10234))
        let state = view.load(AttachResult(json: ["messages": [], "clients": [], "compaction": summary.json]))
        XCTAssertEqual(state["summary"], ["after": "m40", "line": "m1…m40 summarised (1,234 tokens)", "text": "<b>Decided</b> on tabs."])

        XCTAssertEqual(view.apply(.compactionUndone(summary, by: nil)), [["type": "summary", "summary": .null]])
        XCTAssertEqual(view.state["summary"], .null)
        XCTAssertEqual(view.apply(.compactionStarted(by: nil, automatic: true)), [], "nothing shows until it is stored")
        XCTAssertEqual(view.apply(.compactionDelta(content: "Deci")), [])
        let next = Compaction(first: "m1", last: "m42", summary: "Tabs, then spaces.", model: "m")
        XCTAssertEqual(view.apply(.compactionCompleted(next)).first?["summary"]?["after"], "m42")
        XCTAssertEqual(view.state["summary"]?["line"]?.string, "m1…m42 summarised (5 tokens)")
    }
}
