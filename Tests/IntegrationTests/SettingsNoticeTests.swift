import ConfabProtocol
import Foundation
import XCTest

/// A changed model or system prompt is announced on every screen with who changed it, as
/// cancels and approvals are.
final class SettingsNoticeTests: TmuxTestCase {
    private func attach(_ id: String, name: String) throws -> String {
        let pane = try tmux.start("export NO_COLOR=1; " + harness.confabCommand(["attach", id, "--name", name]), width: 100, height: 24)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    func testAModelOrSystemPromptChangeNamesWhoMadeIt() throws {
        let id = try harness.runClient(["new", "--title", "chat"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        try tmux.waitForText(ana, "-- bob (root) joined --")
        try tmux.type(bob, "/model fake-model-2")
        try tmux.send(bob, ["Enter"])
        try tmux.waitForText(ana, "-- model: fake-model-2 (by bob (root)) --")
        try tmux.waitForText(bob, "-- model: fake-model-2 (by you) --")
        try tmux.type(ana, "/system be brief")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(bob, "-- system prompt: be brief (by ana (root)) --")
        try tmux.waitForText(ana, "-- system prompt: be brief (by you) --")
        // From the command line too.
        XCTAssertEqual(try harness.runClient(["configure", id, "--model", "fake-model"]).status, 0)
        try tmux.waitForText(ana, "-- model: fake-model (by ")
    }

    /// `/model NAME --reasoning-effort LEVEL` from one screen: both screens are told the model
    /// and the parameter with who set them, and the next request carries both.
    func testAModelWithAReasoningEffortIsAnnouncedAndSent() throws {
        let id = try harness.runClient(["new", "--title", "effort"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        try tmux.waitForText(ana, "-- bob (root) joined --")
        try tmux.type(bob, "/model fake-model-2 --reasoning-effort high")
        try tmux.send(bob, ["Enter"])
        try tmux.waitForText(ana, "-- model: fake-model-2 (by bob (root)) --")
        try tmux.waitForText(ana, #"-- parameters: {"reasoning_effort":"high"} (by bob (root)) --"#)
        try tmux.waitForText(bob, #"-- parameters: {"reasoning_effort":"high"} (by you) --"#)
        // A level that is not one is refused on the screen that typed it, and nothing changes.
        try tmux.type(bob, "/model --reasoning-effort LOUD!")
        try tmux.send(bob, ["Enter"])
        try tmux.waitForText(bob, "/model --reasoning-effort needs a level such as low, medium or high")
        try tmux.type(bob, "[[reply:done thinking]]")
        try tmux.send(bob, ["Enter"])
        try tmux.waitForText(ana, "done thinking")
        let request = try XCTUnwrap(harness.upstreamRequests().last { $0["method"]?.string == "POST" })
        XCTAssertEqual(request["body"]?["model"]?.string, "fake-model-2")
        XCTAssertEqual(request["body"]?["reasoning_effort"]?.string, "high", "\(request)")
    }
}
