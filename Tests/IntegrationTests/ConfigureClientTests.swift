import ConfabProtocol
import Foundation
import XCTest

/// Changing a conversation's settings as a person does: from the shell, and inside attach.
final class ConfigureClientTests: TmuxTestCase {
    private func lastBody() throws -> JSON {
        try XCTUnwrap(harness.upstreamRequests().last { $0["path"]?.string?.hasSuffix("/chat/completions") == true }?["body"])
    }

    func testAskAndConfigureFromTheShell() throws {
        let id = try harness.runClient(["new", "--title", "shell"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let asked = try harness.runClient(["ask", "-c", id, "--model", "shell-model", "--system", "Shell.", "q [[reply:fine]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(asked.stdout, "fine\n")
        var body = try lastBody()
        XCTAssertEqual(body["model"]?.string, "shell-model")
        XCTAssertEqual(body["messages"]?.array?.first?["content"]?.string, "Shell.")

        let configured = try harness.runClient(["configure", String(id.prefix(6)), "-m", "other-model", "--system", ""])
        XCTAssertEqual(configured.status, 0, configured.stderr)
        XCTAssertEqual(configured.stdout, "")
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:again]]"]).status, 0)
        body = try lastBody()
        XCTAssertEqual(body["model"]?.string, "other-model")
        XCTAssertEqual(body["messages"]?.array?.first?["role"]?.string, "user")

        let refused = try harness.runClient(["configure", id, "--profile", "nope"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains(#"no profile "nope""#), refused.stderr)
        XCTAssertEqual(try harness.runClient(["configure", id]).status, 2)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "--title", "t", "q"]).status, 2)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "--profile", "p", "q"]).status, 2)
    }

    /// `/model` and `/system` are seen on every attached screen.
    func testModelAndSystemInAttachAreShownToEveryScreen() throws {
        let id = try harness.runClient(["new", "--title", "chat"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 120, height: 30)
        try tmux.waitForText(pane, "here: ana (you)")
        let watcher = try tmux.start(harness.confabCommand(["attach", id, "--name", "bo"]), width: 120, height: 30)
        try tmux.waitForText(watcher, "here: bo (you)")
        try tmux.waitForText(pane, "-- bo (root) joined --")
        try tmux.type(pane, "/model tmux-model")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "model: tmux-model")
        try tmux.waitForText(watcher, "model: tmux-model")
        try tmux.type(pane, "/system Speak softly.")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(watcher, "system prompt: Speak softly.")
        try tmux.type(pane, "q [[reply:done]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: done")
        let body = try XCTUnwrap(harness.upstreamRequests().last?["body"])
        XCTAssertEqual(body["model"]?.string, "tmux-model")
        XCTAssertEqual(body["messages"]?.array?.first?["content"]?.string, "Speak softly.")
    }
}
