import ConfabProtocol
import Foundation
import XCTest

/// What a person sees at the client's edges: text that could hide or reorder itself, lines in
/// a narrow pane, Ctrl-C on a half-typed line, and attach without an id.
final class ScreenEdgeTests: TmuxTestCase {
    private func new(_ title: String) throws -> String {
        let made = try harness.runClient(["new", "--title", title])
        XCTAssertEqual(made.status, 0, made.stderr)
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func attach(_ arguments: [String], name: String, width: Int = 80, height: Int = 24,
                        environment: [String: String] = [:]) throws -> String {
        let pane = try tmux.start(harness.confabCommand(["attach"] + arguments + ["--name", name]), environment: environment,
                                  width: width, height: height)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    private func enter(_ pane: String, _ text: String) throws {
        try tmux.type(pane, text)
        try tmux.send(pane, ["Enter"])
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    /// Rows joined back into one text: a row that ended between words adds one space, as the
    /// words' own space did; a word cut in two by the terminal would not read whole again.
    private func joined(_ screen: String) -> String {
        screen.split(whereSeparator: \.isWhitespace).joined(separator: " ").replacingOccurrences(of: ", ", with: ",")
    }

    /// The highest `wN` of a `[[words:N]]` reply on the screen.
    private func highestWord(_ screen: String) -> Int {
        screen.split(whereSeparator: \.isWhitespace).compactMap { word in word.first == "w" ? Int(word.dropFirst()) : nil }.max() ?? 0
    }

    static let hiding = "Intro\rX\n\nHIDDEN PARAGRAPH\n\nVisible end."

    func testALoneCarriageReturnHidesNoParagraphInAttachOrAsk() throws {
        let id = try new("returns")
        let pane = try attach([id], name: "ana")
        let asked = try harness.runClient(["ask", "-c", id, "[[reply:\(Self.hiding)]] [[chunk:2]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        try tmux.waitForScreen(pane, "the whole reply in attach") { screen in
            guard let reply = screen.range(of: "assistant:") else { return false }
            let after = screen[reply.upperBound...]
            guard let hidden = after.range(of: "HIDDEN PARAGRAPH"), let end = after.range(of: "Visible end.") else { return false }
            return after.contains("Intro X") && hidden.upperBound <= end.lowerBound
        }

        let command = harness.confabCommand(["ask", "-c", id]) + " \"$(printf '[[reply:Intro\\rX\\n\\nHIDDEN PARAGRAPH\\n\\nVisible end.]] [[chunk:2]]')\""
        let asking = try tmux.start(command)
        let screen = try tmux.waitForText(asking, "[exit 0]")
        let hidden = try XCTUnwrap(screen.range(of: "HIDDEN PARAGRAPH"), screen)
        let end = try XCTUnwrap(screen.range(of: "Visible end."), screen)
        XCTAssertLessThan(hidden.upperBound, end.lowerBound, screen)
        XCTAssertTrue(screen.contains("Intro X"), screen)
    }

    func testBidiControlsAndSeparatorsFromOthersAreShownByTheirCodePoints() throws {
        let id = try new("bidi")
        let pane = try attach([id], name: "ana")
        let asked = try harness.runClient(["ask", "-c", id, "[[reply:x]] invoice\u{202E}fdp.exe\u{2066}y\u{2069} a\u{2028}b"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let screen = try tmux.waitForText(pane, "invoice<U+202E>fdp.exe<U+2066>y<U+2069> a<U+2028>b")
        for scalar in ["\u{202E}", "\u{2066}", "\u{2069}", "\u{2028}"] {
            XCTAssertFalse(screen.contains(scalar), "\(scalar.unicodeScalars.first!.value) reached the terminal:\n\(screen)")
        }
    }

    func testHelpNoticesAndErrorsWrapBetweenWordsInANarrowPane() throws {
        let id = try new("narrow")
        let pane = try attach([id], name: "ana", width: 54, height: 40)
        try enter(pane, "/help")
        let line = "/approve [CALL] let a tool call that waits for approval run (default the oldest; y alone does too)"
        try tmux.waitForScreen(pane, "the help, its words whole") { self.joined($0).contains(line) }
        // An entry that goes on is indented under the help's second column.
        let rows = try tmux.screen(pane).split(separator: "\n")
        let start = try XCTUnwrap(rows.firstIndex { $0.hasPrefix("/approve [CALL]") })
        XCTAssertTrue(rows[start + 1].hasPrefix(String(repeating: " ", count: 17)) && rows[start + 1].dropFirst(17).first != " ",
                      rows[start...].prefix(3).joined(separator: "\n"))
        try enter(pane, "/frobnicate")
        try tmux.waitForScreen(pane, "the error, its words whole") {
            self.joined($0).contains("confab: unknown command /frobnicate (/help lists them; // sends a line starting with a slash)")
        }
    }

    /// Lines typed from a pipe, the conversation on a terminal: an error is red, not `^[[31m`.
    func testAnErrorOnATerminalIsColouredNotEscaped() throws {
        let id = try new("piped")
        // `swift test` sets NO_COLOR; colour is what is tested here.
        let pane = try tmux.start("unset NO_COLOR; echo /frobnicate | " + harness.confabCommand(["attach", id, "--name", "ana"]))
        let screen = try tmux.waitForText(pane, "[exit 0]")
        XCTAssertTrue(screen.contains("confab: unknown command /frobnicate"), screen)
        XCTAssertFalse(screen.contains("^["), screen)
        let coloured = try tmux.screen(pane, escapes: true)
        XCTAssertTrue(coloured.contains("\u{1B}[31m"), coloured.debugDescription)
    }

    /// Two people on one conversation: bob's half-typed line is his own business; only on an
    /// empty line does his Ctrl-C stop the reply ana asked for.
    func testCtrlCClearsAHalfTypedLineAndCancelsOnlyOnAnEmptyOne() throws {
        let id = try new("chat")
        let ana = try attach([id], name: "ana", width: 100)
        let bob = try attach([id], name: "bob", width: 100)
        try enter(ana, "[[words:5000]] [[delay:5]]")
        try tmux.waitForText(bob, "w30 ")
        try tmux.type(bob, "half typed")
        try tmux.waitForScreen(bob, "the half-typed line") { $0.split(separator: "\n").last == "chat> half typed" }
        try tmux.send(bob, ["C-c"])
        try tmux.waitForScreen(bob, "an empty input line") { $0.split(separator: "\n").last == "chat>" }
        // The reply goes on: words well past those on the screen at the Ctrl-C arrive, and
        // nobody cancelled it.
        let seen = highestWord(try tmux.screen(ana))
        try tmux.waitForScreen(ana, "words past w\(seen + 100)") { self.highestWord($0) > seen + 100 }
        XCTAssertFalse(try tmux.screen(ana).contains("[cancelled"))
        XCTAssertFalse(try tmux.screen(bob).contains("[cancelled"))

        try tmux.send(bob, ["C-c"])
        try tmux.waitForText(ana, "[cancelled by bob (root)")
        try tmux.waitForText(bob, "[cancelled by you]")
        XCTAssertEqual(try history(id).last?["status"]?.string, "cancelled")
        XCTAssertFalse(try history(id).contains { $0["content"]?.string?.contains("half typed") ?? false })
    }

    func testAttachWithoutAnIdTakesThisShellsConversationElseTheLatest() throws {
        let session = "bash-4242-1234"
        let asked = try harness.runClient(["ask", "-C", "[[reply:ok]] mine"], environment: ["CONFAB_SESSION": session])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let latest = try new("the latest one")
        XCTAssertEqual(try harness.runClient(["ask", "-c", latest, "[[reply:ok]] later"]).status, 0)
        let shells = try XCTUnwrap(try harness.client().call("conversation.list")["conversations"]?.array?
            .compactMap { $0["id"]?.string }.first { $0 != latest })

        let own = try attach([], name: "ana", environment: ["CONFAB_SESSION": session])
        let screen = try tmux.waitForText(own, "(\(shells))")
        XCTAssertTrue(screen.contains("[[reply:ok]] mine"), screen)
        let other = try attach([], name: "bob", environment: ["CONFAB_SESSION": "bash-1-unknown"])
        try tmux.waitForText(other, "the latest one (\(latest))")

        // /switch and Tab: a unique start of a title becomes the id.
        try tmux.type(other, "/switch shell")
        try tmux.send(other, ["Tab"])
        try tmux.waitForScreen(other, "the id completed") { $0.split(separator: "\n").last == "the latest one> /switch \(shells)" }
        try tmux.send(other, ["Enter"])
        try tmux.waitForText(other, "(\(shells))")
        // Several conversations fit: each is listed with its title, and the line keeps what was typed.
        try tmux.type(other, "/switch ")
        try tmux.send(other, ["Tab"])
        try tmux.waitForText(other, "-- \(latest)  the latest one --")
        // The list is written first and the input line drawn again after it: wait for both.
        _ = try tmux.waitForScreen(other, "the list, then the line as typed") { screen in
            screen.contains("-- \(shells)  shell ") && screen.split(separator: "\n").last.map { $0.hasSuffix("> /switch") } == true
        }
    }
}
