import ConfabProtocol
import Foundation
import XCTest

/// `confab attach` in real terminals: tmux panes on one conversation.
final class AttachTests: TmuxTestCase {
    private func new(_ title: String = "chat") throws -> String {
        try harness.runClient(["new", "--title", title]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func attach(_ id: String, name: String, width: Int = 80) throws -> String {
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", name]), width: width, height: 24)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    func testTwoPanesSeeTheSameReplyAndEachOther() throws {
        let id = try new()
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        try tmux.waitForText(ana, "-- bob (root) joined --")
        try tmux.type(bob, "[[reply:hello from the model]] hi")
        try tmux.send(bob, ["Enter"])
        for pane in [ana, bob] {
            let screen = try tmux.waitForText(pane, "assistant: hello from the model")
            XCTAssertTrue(screen.contains("bob (root): [[reply:hello from the model]] hi"), screen)
            XCTAssertFalse(screen.contains("assistant:\n"), "no empty reply line:\n\(screen)")
        }
        // A one-shot ask is not announced as a join.
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:quiet]]"]).status, 0)
        let screen = try tmux.waitForText(ana, "assistant: quiet")
        XCTAssertEqual(screen.components(separatedBy: "joined").count - 1, 1, screen)
    }

    func testSlashCommandsAreNotSentAndADoubleSlashSendsOne() throws {
        let id = try new()
        let pane = try attach(id, name: "ana")
        try tmux.type(pane, "/help")
        try tmux.send(pane, ["Enter"])
        // The list's last line: the first ones scroll off a 24-line pane.
        try tmux.waitForText(pane, "//text           send a line that starts with a slash")
        try tmux.type(pane, "/frobnicate")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "unknown command /frobnicate")
        XCTAssertEqual(try history(id).count, 0)
        XCTAssertTrue(harness.upstreamRequests().isEmpty)

        try tmux.type(pane, "//etc/hosts is a file")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "ana (root): /etc/hosts is a file")
        XCTAssertEqual(try history(id).first?["content"]?.string, "/etc/hosts is a file")

        try tmux.type(pane, "/rename better title")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "-- title: better title --")
        try tmux.type(pane, "/quit")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "[exit 0]")
    }

    func testCtrlCCancelsTheReplyAndThePaneStaysAttached() throws {
        let id = try new()
        let pane = try attach(id, name: "ana")
        try tmux.type(pane, "[[words:5000]] [[delay:5]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "w30 ")
        try tmux.send(pane, ["C-c"])
        try tmux.waitForText(pane, "[cancelled by you]")
        XCTAssertEqual(try history(id).last?["status"]?.string, "cancelled")
        try tmux.type(pane, "[[reply:still here]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: still here")
        // Ctrl-C with no reply in flight clears the line being typed.
        try tmux.type(pane, "half typed")
        try tmux.waitForScreen(pane, "the half-typed line") { $0.split(separator: "\n").last == "chat> half typed" }
        try tmux.send(pane, ["C-c"])
        try tmux.waitForScreen(pane, "an empty input line") { $0.split(separator: "\n").last == "chat>" }
        try tmux.type(pane, "[[reply:after clearing]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: after clearing")
        XCTAssertFalse(try history(id).contains { $0["content"]?.string?.contains("half typed") ?? false })
        // Ctrl-D on an empty line detaches.
        try tmux.send(pane, ["C-d"])
        try tmux.waitForText(pane, "[exit 0]")
    }

    func testArrowKeyEditingSendsTheEditedText() throws {
        let id = try new()
        let pane = try attach(id, name: "ana")
        try tmux.type(pane, "[[reply:ok]] helo wrld")
        try tmux.send(pane, ["Left", "Left", "Left"])
        try tmux.type(pane, "o")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: ok")
        XCTAssertEqual(try history(id).first?["content"]?.string, "[[reply:ok]] helo world")
        // Up brings the line back from history.
        try tmux.send(pane, ["Up"])
        try tmux.waitForScreen(pane, "the last line again") { $0.split(separator: "\n").last == "chat> [[reply:ok]] helo world" }
    }

    func testABracketedPasteOfThreeLinesIsOneMessage() throws {
        let id = try new()
        let pane = try attach(id, name: "ana")
        try tmux.paste(pane, "[[reply:pasted]] one\ntwo\nthree")
        try tmux.waitForScreen(pane, "the paste in the input line") { $0.split(separator: "\n").last?.hasPrefix("chat> [[reply:pasted]] one") ?? false }
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: pasted")
        let messages = try history(id)
        XCTAssertEqual(messages.first?["content"]?.string, "[[reply:pasted]] one\ntwo\nthree")
        XCTAssertEqual(messages.count, 2)
        XCTAssertEqual(harness.upstreamRequests().count, 1)

        // Keys after a paste are keys again.
        try tmux.type(pane, "[[reply:typed]] secnd")
        try tmux.send(pane, ["Left", "Left"])
        try tmux.type(pane, "o")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: typed")
        XCTAssertEqual(try history(id)[2]["content"]?.string, "[[reply:typed]] second")
    }

    func testTypingDuringAStreamStaysOnTheInputLine() throws {
        let id = try new()
        let pane = try attach(id, name: "ana", width: 60)
        try tmux.type(pane, "[[words:3000]] [[delay:3]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "w20 ")
        try tmux.type(pane, "half typed")
        let screen = try tmux.waitForText(pane, "w300 ")
        let rows = screen.split(separator: "\n")
        XCTAssertEqual(rows.last, "chat> half typed", screen)
        XCTAssertEqual(rows.filter { $0.contains("half typed") }.count, 1, "typing never lands in the output:\n\(screen)")
        // Ctrl-C takes the half-typed line only; on the empty line it stops the reply.
        try tmux.send(pane, ["C-c"])
        try tmux.waitForScreen(pane, "an empty input line") { $0.split(separator: "\n").last == "chat>" }
        XCTAssertFalse(try tmux.screen(pane).contains("[cancelled"))
        try tmux.send(pane, ["C-c"])
        try tmux.waitForText(pane, "[cancelled by you]")
    }

    func testCJKAndEmojiWrapByDisplayWidthAtANarrowWidth() throws {
        let id = try new()
        let pane = try attach(id, name: "ana", width: 24)
        let reply = "alpha beta gamma delta epsilon 漢字漢字漢字漢字漢字漢字 👋👋👋👋 zeta"
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:\(reply)]] [[chunk:2]]"]).status, 0)
        let screen = try tmux.waitForText(pane, "zeta")
        // The reply's rows: from the assistant's header on (the prompt above holds the text too).
        let all = screen.split(separator: "\n").map(String.init)
        let rows = Array(all.drop { !$0.contains("assistant:") })
        for word in ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"] {
            XCTAssertTrue(rows.contains { $0.contains(word) }, "\(word) is broken across rows:\n\(screen)")
        }
        // Every wide character is whole on a row, and the rows hold all of them.
        let wide = rows.joined().filter { $0 == "漢" || $0 == "字" || $0 == "👋" }
        XCTAssertEqual(wide.count, 16, screen)
    }

    func testADisplayNameComesFromCONFAB_NAMEAndABadOneNamesTheVariable() throws {
        let id = try new()
        let bad = try harness.runClient(["attach", id], environment: ["CONFAB_NAME": "bad\u{7}name"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("CONFAB_NAME=\"bad^Gname\": a display name cannot hold control characters"), bad.stderr)
        // Commands nobody sees do not use it.
        XCTAssertEqual(try harness.runClient(["ls"], environment: ["CONFAB_NAME": "bad\u{7}name"]).status, 0)

        let pane = try tmux.start(harness.confabCommand(["attach", id]), environment: ["CONFAB_NAME": "Ana B."])
        try tmux.waitForText(pane, "here: Ana B. (you)")
    }
}

/// The display name's bounds, as the client and the daemon apply them together.
extension AttachTests {
    func testALongNameInBytesIsTakenAndAnInvisibleOneIsRefusedByTheDaemon() throws {
        let id = try new()
        let long = String(repeating: "a", count: 100)
        let asked = try harness.runClient(["ask", "-c", id, "[[reply:fine]]"], environment: ["CONFAB_NAME": long])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let tooLong = try harness.runClient(["ask", "-c", id, "[[reply:no]]"], environment: ["CONFAB_NAME": String(repeating: "é", count: 65)])
        XCTAssertEqual(tooLong.status, 2)
        XCTAssertTrue(tooLong.stderr.contains("a display name is at most 128 bytes"), tooLong.stderr)
        let hidden = try harness.runClient(["ask", "-c", id, "[[reply:no]]"], environment: ["CONFAB_NAME": "ana" + String(repeating: "\u{3164}", count: 40)])
        XCTAssertEqual(hidden.status, 2)
        XCTAssertTrue(hidden.stderr.contains("must not hold characters drawn as nothing (it holds U+3164)"), hidden.stderr)
    }
}
