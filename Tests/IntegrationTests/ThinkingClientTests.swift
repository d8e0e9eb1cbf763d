import ConfabProtocol
import Foundation
import XCTest

/// What the clients show of a reply's thought: `ask` on standard error (`--reasoning`), its
/// exit for a budget spent thinking, `show` and `export`, and attach's folded status row on
/// two screens, a late attach and `/thinking`, never in the scrollback. The model's thought
/// comes from the fake upstream's `[[think:…]]` directives (docs/fake-upstream.md).
/// Also the small ones met on the way: `ask --help`, and a send refused before it is stored
/// leaving no conversation behind.
final class ThinkingClientTests: TmuxTestCase {
    private func new(_ title: String = "chat") throws -> String {
        try harness.runClient(["new", "--title", title]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func attach(_ id: String, name: String, environment: [String: String] = [:], width: Int = 80) throws -> String {
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", name]), environment: environment, width: width, height: 24)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    /// The pane's whole history and screen, as the terminal keeps them.
    private func scrollback(_ pane: String) throws -> String {
        try tmux.run(["capture-pane", "-p", "-S", "-", "-E", "-", "-t", pane])
    }

    private func conversations() throws -> [JSON] {
        try harness.client().call("conversation.list", ["limit": 100])["conversations"]?.array ?? []
    }

    // MARK: ask --help

    /// The prompt captures every word from its first on, `--help` too: it was read as an
    /// unknown option. Asked for first, it is help, as for every command.
    func testAskHelpAndDashHPrintTheUsage() throws {
        for flag in ["--help", "-h"] {
            let run = try harness.runClient(["ask", flag])
            XCTAssertEqual(run.status, 0, "\(flag): \(run.stderr)")
            XCTAssertTrue(run.stdout.contains("USAGE: confab ask"), run.stdout)
            XCTAssertTrue(run.stdout.contains("--reasoning"), run.stdout)
            XCTAssertFalse(run.stderr.contains("unknown option"), run.stderr)
        }
        XCTAssertTrue(harness.upstreamRequests().isEmpty, "nothing was asked")
        XCTAssertEqual(try conversations().count, 0)
        // After `--` it is the prompt's word, as any other.
        let asked = try harness.runClient(["ask", "--", "--help", "[[reply:ok]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(asked.stdout, "ok\n")
    }

    // MARK: A refused send

    /// An image to a completions provider is refused before anything is stored: the day's
    /// conversation `ask` made for it, or the one --new made, is removed again; one that held
    /// messages before stays as it was.
    func testAnImageRefusedBeforeSendingLeavesNoConversationBehind() throws {
        harness.tearDown()
        harness = try Harness(config: VisionTests.config, topLevel: "default_provider = \"legacy\"")
        tmux = Tmux(directory: harness.directory)
        let path = harness.directory + "/shot.png"
        try Data(AttachmentTests.image(size: 2000, seed: 3)).write(to: URL(fileURLWithPath: path))

        for extra in [[], ["--new"]] {
            let run = try harness.runClient(["ask"] + extra + ["-a", path, "what is this"])
            XCTAssertNotEqual(run.status, 0, "\(extra)")
            XCTAssertTrue(run.stderr.contains("completions"), run.stderr)
            XCTAssertEqual(try conversations().count, 0, "\(extra): \(run.stderr)")
        }

        // The day's conversation with a reply in it is not the refused send's to remove.
        XCTAssertEqual(try harness.runClient(["ask", "[[reply:fine]] hello"]).status, 0)
        let day = try XCTUnwrap(try conversations().first?["id"]?.string)
        let refused = try harness.runClient(["ask", "-a", path, "and this?"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertEqual(try conversations().compactMap { $0["id"]?.string }, [day])
        let history = try harness.client().call("conversation.history", ["conversation": .string(day)])["messages"]?.array ?? []
        XCTAssertEqual(history.count, 2)
    }

    // MARK: ask (the fake upstream's [[think:…]])

    /// Into a pipe the thought goes to standard error byte for byte with --reasoning, never to
    /// standard output; without it, nothing of it is written anywhere but the terminal's row.
    func testAskReasoningWritesTheThoughtToStandardErrorOnly() throws {
        let thought = "First \u{1B}[31mred\u{1B}[0m then the answer"
        let with = try harness.runClient(["ask", "--reasoning", "[[think:\(thought)]] [[reply:The answer]] q"])
        XCTAssertEqual(with.status, 0, with.stderr)
        XCTAssertEqual(with.stdout, "The answer\n")
        XCTAssertTrue(with.stderr.contains(thought + "\n"), "raw bytes into a pipe, ended by a line break: \(with.stderr.debugDescription)")

        let without = try harness.runClient(["ask", "-c", try XCTUnwrap(try conversations().first?["id"]?.string),
                                             "[[think:\(thought)]] [[reply:Again]] q"])
        XCTAssertEqual(without.status, 0, without.stderr)
        XCTAssertEqual(without.stdout, "Again\n")
        XCTAssertFalse(without.stderr.contains("red"), without.stderr)
    }

    /// On a terminal: the folded row on standard error while the model thinks (dim, then
    /// gone), and with --reasoning the thought made safe.
    func testAskOnATerminalShowsTheThinkingRowThenTheAnswer() throws {
        let id = try new()
        let pane = try tmux.start(harness.confabCommand(["ask", "-c", id, "[[think-words:40]] [[think-delay:20]] [[hold:0 ask]] [[reply:Done here]] q"]))
        // The text is held after the thought until the row has been seen.
        try tmux.waitForScreen(pane, "the thinking row") { $0.contains("thinking… ") && $0.contains(" s · ") && $0.contains(" t") }
        try harness.releaseUpstream("ask")
        let screen = try tmux.waitForText(pane, "[exit 0]")
        XCTAssertTrue(screen.contains("Done here"), screen)
        XCTAssertFalse(screen.contains("thinking…"), "the row is erased once the text starts:\n\(screen)")

        let hostile = try tmux.start(harness.confabCommand(["ask", "--reasoning", "-c", id, "[[think:see \u{1B}]0;owned\u{07}this]] [[reply:ok]] q"]))
        let shown = try tmux.waitForText(hostile, "[exit 0]")
        XCTAssertTrue(shown.contains("see ^[]0;owned^Gthis"), shown)
    }

    /// All of max_tokens spent thinking: said once, in the daemon's words, and exit 4.
    func testAskExits4WhenTheModelSpentItsBudgetThinking() throws {
        let run = try harness.runClient(["ask", "[[think-only]] [[think-words:20]] q"])
        XCTAssertEqual(run.status, 4, run.stderr)
        XCTAssertEqual(run.stdout, "")
        XCTAssertEqual(run.stderr.components(separatedBy: "thinking and wrote no answer").count - 1, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("max_tokens"), run.stderr)
    }

    // MARK: show and export

    func testShowAndExportCarryTheThought() throws {
        let run = try harness.runClient(["ask", "[[think:Weighing <b>both</b> options\nthen picking]] [[reply:Picked]] q"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let id = try XCTUnwrap(try conversations().first?["id"]?.string)

        let show = try harness.runClient(["show", id]).stdout
        XCTAssertTrue(show.contains("[thought for "), show)
        XCTAssertFalse(show.contains("  Weighing"), "folded without --reasoning:\n\(show)")
        let whole = try harness.runClient(["show", "--reasoning", id]).stdout
        XCTAssertTrue(whole.contains("  Weighing <b>both</b> options\n  then picking\n"), whole)
        XCTAssertLessThan(try XCTUnwrap(whole.range(of: "then picking")).lowerBound, try XCTUnwrap(whole.range(of: "Picked")).lowerBound)

        let markdown = try harness.runClient(["export", id]).stdout
        XCTAssertTrue(markdown.contains("> **Thought for "), markdown)
        XCTAssertTrue(markdown.contains("> Weighing <b>both</b> options\n> then picking\n"), markdown)
        let json = try harness.runClient(["export", "--format", "json", id]).stdout
        let messages = try XCTUnwrap(try JSON.parse(json).array)
        let reasoning = try XCTUnwrap(messages.last?["reasoning"])
        XCTAssertEqual(reasoning["text"]?.string, "Weighing <b>both</b> options\nthen picking")
        XCTAssertNotNil(reasoning["started"]?.string)
        XCTAssertNotNil(reasoning["ended"]?.string)
    }

    // MARK: attach

    /// Two screens while the model thinks: the folded row on both, `/thinking` prints the
    /// thought so far on the one that asks, a screen attached mid-thought shows the row
    /// from the daemon's start; the row ends when the text starts and never enters the
    /// scrollback.
    func testTwoScreensAndALateAttachSeeTheFoldedThinkingRow() throws {
        let id = try new()
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        // The text is held after the thought until every screen has seen the row.
        try tmux.type(bob, "[[think-words:60]] [[think-delay:20]] [[hold:0 answer]] [[reply:The answer is 42]] go")
        try tmux.send(bob, ["Enter"])
        for pane in [ana, bob] {
            try tmux.waitForScreen(pane, "the thinking row on \(pane)") { screen in
                screen.split(separator: "\n").contains { $0.hasPrefix("thinking… ") && $0.contains(" s · ") && $0.contains("t") }
            }
        }
        let late = try attach(id, name: "cleo")
        try tmux.waitForScreen(late, "the late attach's thinking row") { screen in
            screen.split(separator: "\n").contains { $0.hasPrefix("thinking… ") }
        }

        try tmux.type(ana, "/thinking")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForScreen(ana, "the thought so far") { $0.contains("m2: thinking for ") && $0.contains("  t1") }
        try harness.releaseUpstream("answer")

        for pane in [ana, bob, late] {
            let screen = try tmux.waitForText(pane, "assistant: The answer is 42", timeout: 30)
            XCTAssertFalse(screen.contains("thinking… "), "the row ends when the text starts:\n\(screen)")
            let history = try scrollback(pane)
            XCTAssertFalse(history.contains("thinking… "), "the row never enters the scrollback:\n\(history)")
        }

        // A finished reply's thought, fetched whole.
        try tmux.type(bob, "/thinking m2")
        try tmux.send(bob, ["Enter"])
        try tmux.waitForScreen(bob, "the whole thought") { $0.contains("m2: thought for ") && $0.contains(" t60") }
        try tmux.type(bob, "/thinking m1")
        try tmux.send(bob, ["Enter"])
        try tmux.waitForText(bob, "/thinking: no reply m1")
    }

    /// NO_COLOR: the row without attributes, and a narrow pane keeps it on one row.
    func testTheRowHonoursNoColourAndANarrowPane() throws {
        let id = try new()
        let pane = try attach(id, name: "ana", environment: ["NO_COLOR": "1"], width: 30)
        try tmux.type(pane, "[[think:a very long line of thought that goes on past any narrow pane]] [[hold:0 narrow]] [[reply:ok]] go")
        try tmux.send(pane, ["Enter"])
        let screen = try tmux.waitForScreen(pane, "the row cut to the pane") { screen in
            screen.split(separator: "\n").contains { $0.hasPrefix("thinking… ") && $0.hasSuffix("…") }
        }
        let row = try XCTUnwrap(screen.split(separator: "\n").first { $0.hasPrefix("thinking… ") })
        XCTAssertLessThan(row.count, 30, String(row))
        let escapes = try tmux.screen(pane, escapes: true)
        XCTAssertFalse(escapes.contains("\u{1B}[2m"), escapes)
        try harness.releaseUpstream("narrow")
        // At 30 columns the reply's header is a row of its own.
        try tmux.waitForScreen(pane, "the answer") { $0.contains("assistant:") && $0.contains("\nok\n") }
    }
}
