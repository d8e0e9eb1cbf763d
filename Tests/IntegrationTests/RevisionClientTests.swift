import ConfabProtocol
import Foundation
import XCTest

/// retry, continue, fork and search as a person uses them: from the shell, and inside attach.
final class RevisionClientTests: TmuxTestCase {
    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    func testRetryContinueForkAndSearchFromTheShell() throws {
        let id = try harness.runClient(["new", "--title", "shell"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "q [[reply:an answer]]"]).stdout, "an answer\n")

        let retried = try harness.runClient(["retry", String(id.prefix(6))])
        XCTAssertEqual(retried.status, 0, retried.stderr)
        XCTAssertEqual(retried.stdout, "an answer\n")
        XCTAssertEqual(try history(id).map { $0["superseded_by"]?.string ?? "-" }, ["-", "m3", "-"])
        let shown = try harness.runClient(["show", id]).stdout
        XCTAssertTrue(shown.contains(" · m2 · replaced by m3"), shown)

        let refused = try harness.runClient(["continue", id])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("length"), refused.stderr)
        // A reply the length limit cut off exits 4, saying how to go on.
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:cut short]] [[finish:length]]"]).status, 4)
        let continued = try harness.runClient(["continue", id])
        XCTAssertEqual(continued.status, 0, continued.stderr)
        XCTAssertTrue(continued.stdout.hasPrefix("You said: Continue your last answer"), continued.stdout)
        XCTAssertEqual(try history(id).last?["content"]?.string,
                       "cut short" + continued.stdout.trimmingCharacters(in: .newlines))

        let fork = try harness.runClient(["fork", id, "--at", "m1", "--title", "branch"])
        XCTAssertEqual(fork.status, 0, fork.stderr)
        let forkID = fork.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(fork.stderr.contains("confab attach \(forkID)"), fork.stderr)
        XCTAssertEqual(try history(forkID).first?["content"]?.string, "q [[reply:an answer]]")
        XCTAssertEqual(try harness.runClient(["fork", id, "--at", "nine"]).status, 2)

        let found = try harness.runClient(["search", "CUT", "short"])
        XCTAssertEqual(found.status, 0, found.stderr)
        let lines = found.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, found.stdout)
        XCTAssertTrue(lines[0].hasPrefix("\(id) m5  ") && lines[0].hasSuffix("  shell"), lines[0])
        XCTAssertTrue(lines[1].hasPrefix("    assistant: cut short"), lines[1])
        XCTAssertTrue(lines[3].hasPrefix("    user: [[reply:cut short]]"), lines[3])
        let missing = try harness.runClient(["search", "nowhere", "to", "be", "found"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("no message holds"), missing.stderr)
    }

    /// A snippet is somebody else's text: it reaches the terminal with its controls made visible.
    func testSearchResultsShowNoEscapeSequences() throws {
        let id = try harness.runClient(["new", "--title", "title \u{1B}]2;PWNED\u{07}"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:danger \u{1B}[31mred\u{1B}[0m zone]]"]).status, 0)
        let pane = try tmux.start(harness.confabCommand(["search", "danger"]), width: 120, height: 20)
        let screen = try tmux.waitForText(pane, "[exit 0]")
        XCTAssertTrue(screen.contains("danger ^[[31mred^[[0m zone"), screen)
        XCTAssertTrue(screen.contains("title ^[]2;PWNED^G"), screen)
        XCTAssertFalse(try tmux.format(pane, "#{pane_title}").contains("PWNED"))
    }

    func testAttachRetriesListsVersionsEditsTheLastMessageContinuesAndForks() throws {
        let id = try harness.runClient(["new", "--title", "chat"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]),
                                  environment: ["EDITOR": "sed -i s/one/two/"], width: 140, height: 40)
        try tmux.waitForText(pane, "here: ana (you)")
        try tmux.type(pane, "q [[reply:version one]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: version one")

        try tmux.type(pane, "/retry")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "-- the reply m2 is replaced by m3 (/versions lists earlier replies) --")
        try tmux.waitForScreen(pane, "a second reply") { $0.components(separatedBy: "assistant: version one").count == 3 }
        try tmux.type(pane, "/versions")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "-- version 1 of 2 (m2) --")
        try tmux.waitForText(pane, "-- version 2 (m3) is the current one --")

        try tmux.type(pane, "/edit-last")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: version two")
        try tmux.waitForText(pane, "-- m1 was edited: m4 takes its place --")
        try tmux.waitForText(pane, "-- the reply m3 is left out: its question was edited --")
        let edited = try history(id)
        XCTAssertEqual(edited.map { $0["superseded_by"]?.string ?? "-" }, ["m4", "m3", "m4", "-", "-"])
        XCTAssertEqual(edited[3]["content"]?.string, "q [[reply:version two]]")

        try tmux.type(pane, "[[reply:cut short]] [[finish:length]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: cut short")
        try tmux.type(pane, "/continue")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant (continued): You said: Continue your last answer")
        // Forking waits for the continuation to end (it is out of the stored messages meanwhile).
        try tmux.waitForText(pane, "preamble.")
        let deadline = Date().addingTimeInterval(10)
        while try history(id).last?["status"]?.string != "complete", Date() < deadline { usleep(50_000) }

        try tmux.type(pane, "/fork m4")
        try tmux.send(pane, ["Enter"])
        let screen = try tmux.waitForText(pane, "(its last question is being answered)")
        let forked = try XCTUnwrap(screen.split(separator: "\n").first { $0.contains("-- forked as ") })
        let forkID = String(forked.split(separator: " ")[3].dropLast())
        XCTAssertEqual(try history(forkID).first?["content"]?.string, "q [[reply:version two]]")

        // A new pane shows the conversation as it reads now: replaced messages left out.
        let second = try tmux.start(harness.confabCommand(["attach", id, "--name", "bob"]), width: 100, height: 40)
        let now = try tmux.waitForText(second, "preamble.")
        XCTAssertFalse(now.contains("version one"), now)
        XCTAssertTrue(now.contains("assistant: version two"), now)
        XCTAssertTrue(now.contains("You said: Continue your last answer"), now)
    }
}
