import ConfabProtocol
import Foundation
import XCTest

/// ls, show, export, rm and cancel as people type them.
final class ConversationCommandsTests: TmuxTestCase {
    private func new(_ title: String) throws -> String {
        let made = try harness.runClient(["new", "--title", title])
        XCTAssertEqual(made.status, 0, made.stderr)
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testLsHasAHeaderCountsInWordsAndSaysHowManyMoreThereAre() throws {
        let empty = try harness.runClient(["ls"])
        XCTAssertEqual(empty.stdout, "")
        XCTAssertTrue(empty.stderr.contains("confab ask"), empty.stderr)

        let first = try new("first")
        XCTAssertEqual(try harness.runClient(["ask", "-c", first, "[[reply:one]]"]).status, 0)
        for index in 2...4 { _ = try new("title \(index)") }
        let listed = try harness.runClient(["list", "-n", "2"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, listed.stdout)
        XCTAssertTrue(lines[0].hasPrefix("ID") && lines[0].contains("UPDATED") && lines[0].contains("MESSAGES") && lines[0].contains("TITLE"), lines[0])
        XCTAssertTrue(lines[1].contains("0 messages") && lines[1].contains("just now") && lines[1].contains("fake-model"), lines[1])
        XCTAssertEqual(lines[3], "… and 2 more conversations (confab ls --all, or -n N)")

        let all = try harness.runClient(["ls", "--all"]).stdout
        XCTAssertEqual(all.split(separator: "\n").count, 5, all)
        XCTAssertTrue(all.contains("2 messages") && all.contains("first"), all)
    }

    func testLsCutsTitlesToTheTerminalByDisplayWidth() throws {
        _ = try new(String(repeating: "漢字", count: 40))
        let pane = try tmux.start(harness.confabCommand(["ls"]), width: 60)
        let screen = try tmux.waitForText(pane, "[exit 0]")
        let row = try XCTUnwrap(screen.split(separator: "\n").first { $0.contains("漢字") })
        XCTAssertTrue(row.hasSuffix("…"), String(row))
        XCTAssertFalse(screen.split(separator: "\n").contains { $0.hasPrefix("字") || $0.hasPrefix("漢") }, "no title wraps:\n\(screen)")
    }

    func testShowAndExportGiveTheWholeConversation() throws {
        let id = try new("exported")
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:the answer]] question"], environment: ["CONFAB_NAME": "Ana"]).status, 0)

        let shown = try harness.runClient(["show", id])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertTrue(shown.stdout.hasPrefix("exported (\(id)) · 2 messages\n"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("── Ana (root) · ") && shown.stdout.contains("── assistant (fake-model) · "), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("the answer\n"), shown.stdout)

        let markdown = try harness.runClient(["export", id]).stdout
        XCTAssertTrue(markdown.hasPrefix("# exported\n\n## user: Ana (root), "), markdown)
        XCTAssertTrue(markdown.contains("\n## assistant (fake-model), ") && markdown.hasSuffix("\nthe answer\n"), markdown)

        let json = try JSON.parse(try harness.runClient(["export", id, "--format", "json"]).stdout)
        XCTAssertEqual(json.array?.map { $0["role"]?.string ?? "" }, ["user", "assistant"])
        let lines = try harness.runClient(["export", id, "--format", "jsonl"]).stdout.split(separator: "\n")
        XCTAssertEqual(try lines.map { try JSON.parse(String($0))["id"]?.string ?? "" }, ["m1", "m2"])

        let bad = try harness.runClient(["export", id, "--format", "html"])
        XCTAssertEqual(bad.status, 2, bad.stderr)
    }

    /// `export --format json|jsonl` writes the messages as confabd encoded them, made
    /// terminal-safe byte by byte: exactly each message's `terminalSafeText`, across pages
    /// (2,100 messages are three pages of history) and with every control and bidi character.
    func testExportWritesEveryPageExactlyAsTheParsedMessagesWouldBe() throws {
        harness.stopDaemon()
        let generated = try OtherProcess.run(Binaries.path("confab-loggen"),
                                        ["--data-dir", harness.dataDirectory, "--conversations", "1", "--messages", "2100", "--message-bytes", "60"])
        XCTAssertEqual(generated.status, 0, generated.stderr)
        try harness.startDaemon()
        let client = try harness.client()
        let id = try XCTUnwrap(client.call("conversation.list")["conversations"]?.array?.first?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let hostile = "esc \u{1B}[2J c1 \u{9B}31m del \u{7F} bidi \u{202E}txt.exe\u{202C} sep \u{2028} cr \r lf \n tab \t 漢 🙂"
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(hostile + " [[reply:\(hostile)]]")])
        XCTAssertEqual(try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final["status"]?.string, "complete")

        var messages: [JSON] = []
        var before: JSON = .null
        repeat {
            let page = try client.call("conversation.history", ["conversation": .string(id), "limit": 1000, "before": before])
            messages.insert(contentsOf: page["messages"]?.array ?? [], at: 0)
            before = page["more"]?.bool == true ? page["messages"]?.array?.first?["id"] ?? .null : .null
        } while !before.isNull
        XCTAssertEqual(messages.count, 2102)

        let jsonl = try harness.runClient(["export", id, "--format", "jsonl"])
        XCTAssertEqual(jsonl.status, 0, jsonl.stderr)
        XCTAssertEqual(jsonl.stdout, messages.map { $0.terminalSafeText + "\n" }.joined())
        XCTAssertFalse(jsonl.stdout.unicodeScalars.contains { JSON.escapesForTerminal($0) && $0 != "\n" }, "nothing a terminal acts on")
        let json = try harness.runClient(["export", id, "--format", "json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(json.stdout, JSON.array(messages).terminalSafeText + "\n")
    }

    func testRmAsksOnATerminalUnlessForced() throws {
        let kept = try new("keep me")
        let pane = try tmux.start(harness.confabCommand(["rm", kept]))
        try tmux.waitForText(pane, "delete \"keep me\" (\(kept), 0 messages)? [y/N]")
        try tmux.send(pane, ["n", "Enter"])
        try tmux.waitForText(pane, "[exit 1]")
        XCTAssertTrue(try harness.runClient(["ls"]).stdout.contains(kept))

        let gone = try new("delete me")
        let second = try tmux.start(harness.confabCommand(["delete", gone]))
        try tmux.waitForText(second, "? [y/N]")
        try tmux.send(second, ["y", "Enter"])
        try tmux.waitForText(second, "[exit 0]")
        XCTAssertFalse(try harness.runClient(["ls"]).stdout.contains(gone))

        let forced = try tmux.start(harness.confabCommand(["rm", "-f", kept]))
        try tmux.waitForText(forced, "[exit 0]")
        XCTAssertEqual(try harness.runClient(["ls"]).stdout, "")
    }

    func testCancelIsQuietWhenItStopsAReplyAndFailsWhenThereIsNone() throws {
        let id = try new("cancel")
        let watcher = try harness.client()
        try watcher.call("conversation.attach", ["conversation": .string(id), "history": 0])
        try watcher.call("message.send", ["conversation": .string(id), "content": "[[words:5000]] [[delay:5]]"])
        _ = try watcher.collect(until: { method, _ in method == "message.delta" })
        let cancelled = try harness.runClient(["cancel", id])
        XCTAssertEqual(cancelled.status, 0, cancelled.stderr)
        XCTAssertEqual(cancelled.stdout + cancelled.stderr, "")
        let notes = try watcher.collect(until: { method, _ in method == "message.completed" })
        let by = notes.first { $0.method == "generation.cancelled" }
        XCTAssertEqual(by?.params["by"]?["client"]?.string, "confab-cancel")
        XCTAssertEqual(notes.last?.params["message"]?["status"]?.string, "cancelled")

        let nothing = try harness.runClient(["cancel", id])
        XCTAssertEqual(nothing.status, 1)
        XCTAssertEqual(nothing.stderr, "confab: nothing to cancel\n")
    }
}
