import ConfabProtocol
import Foundation
import XCTest

/// /compact, /summary and /uncompact on two attached screens, and the line where a summary
/// stands in attach, `confab show` and `confab export`.
final class CompactionScreenTests: TmuxTestCase {
    private func attach(_ id: String, name: String) throws -> String {
        let pane = try tmux.start("export NO_COLOR=1; " + harness.confabCommand(["attach", id, "--name", name]), width: 120, height: 40)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    private func scrollback(_ pane: String) throws -> String {
        try tmux.run(["capture-pane", "-p", "-J", "-S", "-", "-t", pane])
    }

    private func waitForScrollback(_ pane: String, _ text: String, count: Int = 1, file: StaticString = #filePath, line: UInt = #line) throws {
        let deadline = Date().addingTimeInterval(20)
        var all = ""
        while Date() < deadline {
            all = try scrollback(pane)
            if all.components(separatedBy: text).count - 1 >= count { return }
            usleep(20_000)
        }
        XCTFail("timed out waiting for \(count) × \"\(text)\":\n\(all)", file: file, line: line)
        throw HarnessError(description: "timed out waiting for \(text)")
    }

    func testCompactSummaryAndUncompactOnTwoScreens() throws {
        let id = try harness.runClient(["new", "--title", "chat"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let client = try harness.client()
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:one]] q1"])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        try client.call("conversation.detach", ["conversation": .string(id)])
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")

        try tmux.type(ana, "/compact [[reply:Ana and Bob settled on one.]] numbers")
        try tmux.send(ana, ["Enter"])
        let line = "/summary to read, /uncompact to undo ──"
        for pane in [ana, bob] {
            try waitForScrollback(pane, "── m1…m2 summarised (")
            try waitForScrollback(pane, line)
        }
        try waitForScrollback(bob, "being summarised (asked by ana")

        try tmux.type(bob, "/summary")
        try tmux.send(bob, ["Enter"])
        try waitForScrollback(bob, "summary of m1…m2 by fake-model")
        try waitForScrollback(bob, "Ana and Bob settled on one.")
        XCTAssertFalse(try scrollback(ana).contains("Ana and Bob settled on one.\n"), "only bob asked to read it")

        try tmux.type(bob, "/uncompact")
        try tmux.send(bob, ["Enter"])
        try waitForScrollback(ana, "the summary of m1…m2 is undone by bob")
        try waitForScrollback(bob, "the summary of m1…m2 is undone by you")
        try tmux.type(ana, "/summary")
        try tmux.send(ana, ["Enter"])
        try waitForScrollback(ana, "no summary is in force")

        // From the command line, and where it stands in a fresh attach, show and export.
        let compacted = try harness.runClient(["compact", id, "--focus", "[[reply:Second summary.]]"])
        XCTAssertEqual(compacted.status, 0, compacted.stderr)
        XCTAssertTrue(compacted.stdout.hasPrefix("Second summary.\n── m1…m2 summarised ("), compacted.stdout)
        try waitForScrollback(ana, "── m1…m2 summarised (", count: 2)
        let carol = try attach(id, name: "carol")
        let shown = try scrollback(carol)
        let summaryLine = try XCTUnwrap(shown.range(of: "── m1…m2 summarised ("))
        let reply = try XCTUnwrap(shown.range(of: "one\n"))
        XCTAssertTrue(reply.upperBound <= summaryLine.lowerBound, "the line stands after m2:\n\(shown)")
        let show = try harness.runClient(["show", id]).stdout
        XCTAssertTrue(show.contains("one\n\n── m1…m2 summarised ("), show)
        XCTAssertTrue(show.contains(line), show)
        let export = try harness.runClient(["export", id]).stdout
        XCTAssertTrue(export.contains("one\n\n── m1…m2 summarised ("), export)
        XCTAssertFalse(try harness.runClient(["export", id, "--format", "jsonl"]).stdout.contains("summarised"))

        let undone = try harness.runClient(["uncompact", id])
        XCTAssertEqual(undone.stdout, "the summary of m1…m2 is undone\n")
        XCTAssertFalse(try harness.runClient(["show", id]).stdout.contains("summarised"))
    }
}
