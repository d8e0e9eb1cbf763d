import ConfabProtocol
import Foundation
import XCTest

/// Attaching files as a person does it, in real terminals: `confab ask -a`, `/attach`,
/// `/detach`, and what every attached screen shows.
final class AttachmentScreenTests: TmuxTestCase {
    private func new(_ title: String = "files") throws -> String {
        try harness.runClient(["new", "--title", title]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// An attach pane whose working directory is the test's directory (where its files are).
    private func attach(_ id: String, name: String) throws -> String {
        let command = "cd \(Tmux.quoted(harness.directory)) && " + harness.confabCommand(["attach", id, "--name", name])
        let pane = try tmux.start(command, width: 100, height: 30)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    private func write(_ name: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: harness.directory + "/" + name))
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    func testAskWithAFileInATerminalAndTheAttachedLineOnAnotherScreen() throws {
        let id = try new()
        try write("pixel.png", AttachmentClientTests.png)
        let watcher = try attach(id, name: "bob")
        let asker = try tmux.start("cd \(Tmux.quoted(harness.directory)) && "
                                   + harness.confabCommand(["ask", "-c", id, "-a", "pixel.png", "[[reply:a red pixel]] what is it?"]))
        try tmux.waitForText(asker, "a red pixel")
        try tmux.waitForText(asker, "[exit 0]")
        let screen = try tmux.waitForText(watcher, "[attached: pixel.png, 69 B, image/png]")
        XCTAssertTrue(screen.contains("what is it?\n  [attached: pixel.png, 69 B, image/png]") || screen.contains("what is it?\n[attached: pixel.png"),
                      screen)
        try tmux.waitForText(watcher, "assistant: a red pixel")

        // An image is not written to a terminal.
        let getter = try tmux.start(harness.confabCommand(["attachment", id, "m1", "1"]))
        let refused = try tmux.waitForText(getter, "[exit 1]")
        XCTAssertTrue(refused.contains("not writing pixel.png, 69 B, image/png to a terminal"), refused)
        // The advice names no file: a name is the sender's text, never part of a command to paste.
        XCTAssertTrue(refused.contains("redirect it to a file (> FILE)"), refused)
    }

    /// A pipe nobody writes to would hold the screen until written: /attach takes regular files only.
    func testAttachRefusesAPipeInsteadOfWaitingForIt() throws {
        let id = try new()
        let fifo = harness.directory + "/waiting.fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let ana = try attach(id, name: "ana")
        try tmux.type(ana, "/attach waiting.fifo")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "cannot attach waiting.fifo: cannot read it (it is not a regular file)")
        try tmux.type(ana, "/attach")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "-- no files attached: /attach PATH adds one to the next message --")
    }

    func testATextFileWrittenToATerminalCannotDriveIt() throws {
        let id = try new()
        try write("colours.txt", Array("plain \u{1B}[31mred\u{1B}]0;title\u{07} end\n".utf8))
        let asked = try harness.runClient(["ask", "-c", id, "-a", harness.directory + "/colours.txt", "[[reply:ok]] see"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let pane = try tmux.start(harness.confabCommand(["attachment", id, "m1", "1"]))
        let screen = try tmux.waitForText(pane, "[exit 0]")
        XCTAssertTrue(screen.contains("plain ^[[31mred^[]0;title^G end"), screen)
        XCTAssertFalse(try tmux.screen(pane, escapes: true).contains("\u{1B}[31m"))
    }

    func testAttachListDetachAndTheNextMessageCarriesThem() throws {
        let id = try new()
        try write("notes.txt", Array("twelve bytes".utf8))
        try write("my pic.png", AttachmentClientTests.png)
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")

        try tmux.type(ana, "/attach notes.txt 'my pic.png'")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "-- attached notes.txt, 12 B, text/plain --")
        try tmux.waitForText(ana, "-- attached my pic.png, 69 B, image/png --")
        try tmux.waitForScreen(ana, "the prompt counting the files") { $0.split(separator: "\n").last == "files +2 files>" }
        try tmux.type(ana, "/attach")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "-- 2. my pic.png, 69 B, image/png --")
        try tmux.type(ana, "/detach")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "-- dropped 2 attached files --")
        try tmux.waitForScreen(ana, "the prompt without files") { $0.split(separator: "\n").last == "files>" }

        // A refusal names the file and keeps nothing.
        try tmux.type(ana, "/attach nothing-here.txt")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "cannot attach nothing-here.txt: no such file")

        // Tab completes the path, with a backslash before the space.
        try tmux.type(ana, "/attach my")
        try tmux.send(ana, ["Tab"])
        try tmux.waitForScreen(ana, "the completed path") { $0.split(separator: "\n").last == "files> /attach my\\ pic.png" }
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "-- attached my pic.png, 69 B, image/png --")
        try tmux.type(ana, "[[reply:got it]] have a look")
        try tmux.send(ana, ["Enter"])
        for pane in [ana, bob] {
            let screen = try tmux.waitForText(pane, "[attached: my pic.png, 69 B, image/png]")
            XCTAssertTrue(screen.contains("have a look"), screen)
            try tmux.waitForText(pane, "assistant: got it")
        }
        let user = try history(id).first
        XCTAssertEqual(user?["attachments"]?.array?.first?["name"]?.string, "my pic.png")
        // Sent, so nothing is pending any more.
        try tmux.type(ana, "/attach")
        try tmux.send(ana, ["Enter"])
        try tmux.waitForText(ana, "-- no files attached: /attach PATH adds one to the next message --")
    }

    func testARefusedSendKeepsItsFilesAttached() throws {
        // A profile whose model takes no images: confabd refuses a message carrying one.
        harness.tearDown()
        harness = try Harness(config: "[profiles.blind]\nvision = false\n")
        tmux = Tmux(directory: harness.directory)
        let id = try harness.runClient(["new", "--title", "blind", "--profile", "blind"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try write("pixel.png", AttachmentClientTests.png)
        let pane = try attach(id, name: "ana")
        try tmux.type(pane, "/attach pixel.png")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "-- attached pixel.png, 69 B, image/png --")
        try tmux.type(pane, "[[reply:never]] what is it?")
        try tmux.send(pane, ["Enter"])
        let refused = try tmux.waitForText(pane, "-- 1 file still attached for the next message (/detach drops them) --")
        XCTAssertTrue(refused.contains("not sent:") && refused.contains("blind"), refused)
        XCTAssertEqual(try history(id).count, 0)
        try tmux.type(pane, "/attach")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "-- 1. pixel.png, 69 B, image/png --")
        try tmux.type(pane, "/detach")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "-- dropped 1 attached file --")
        try tmux.type(pane, "[[reply:words alone]] then in words")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: words alone")
        XCTAssertNil(try history(id).first?["attachments"])
    }

    func testAHostileFileNameIsShownEscaped() throws {
        let id = try new()
        let red = "\u{1B}[31mred.txt"
        let reversed = "evil\u{202E}txt.sh"
        try write(red, Array("red\n".utf8))
        try write(reversed, Array("echo\n".utf8))
        let watcher = try attach(id, name: "bob")
        let asked = try harness.runClient(["ask", "-c", id, "-a", harness.directory + "/" + red,
                                           "-a", harness.directory + "/" + reversed, "[[reply:names]] names"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        try tmux.waitForText(watcher, "[attached: ^[[31mred.txt, 4 B, text/plain]")
        try tmux.waitForText(watcher, "[attached: evil<U+202E>txt.sh, 5 B, text/plain]")
        try tmux.waitForText(watcher, "assistant: names")
        let colours = try tmux.screen(watcher, escapes: true)
        XCTAssertFalse(colours.contains("\u{1B}[31m"), "the name recoloured the screen:\n\(colours.debugDescription)")

        // A name that reached a log raw (written by some other client, or by hand) is shown
        // escaped all the same.
        harness.stopDaemon()
        let log = harness.dataDirectory + "/conversations/\(id).jsonl"
        var record = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(record.contains("\"^[[31mred.txt\"") && record.contains("\"evil<U+202E>txt.sh\""), record)
        record = record.replacingOccurrences(of: "\"^[[31mred.txt\"", with: "\"\\u001b[31mred.txt\"")
            .replacingOccurrences(of: "\"evil<U+202E>txt.sh\"", with: "\"evil\\u202etxt.sh\"")
        try record.write(toFile: log, atomically: true, encoding: .utf8)
        try harness.startDaemon()
        let names = try history(id).first?["attachments"]?.array?.compactMap { $0["name"]?.string }
        XCTAssertEqual(names, ["\u{1B}[31mred.txt", "evil\u{202E}txt.sh"], "the log was not read back as written")
        let later = try attach(id, name: "carol")
        try tmux.waitForText(later, "[attached: ^[[31mred.txt, 4 B, text/plain]")
        try tmux.waitForText(later, "[attached: evil<U+202E>txt.sh, 5 B, text/plain]")
        let laterColours = try tmux.screen(later, escapes: true)
        XCTAssertFalse(laterColours.contains("\u{1B}[31m"), "the name recoloured the screen:\n\(laterColours.debugDescription)")
        let shown = try harness.runClient(["show", id]).stdout
        XCTAssertTrue(shown.contains("[attached: ^[[31mred.txt, 4 B, text/plain]"), shown)
        XCTAssertFalse(shown.contains("\u{1B}") || shown.contains("\u{202E}"), shown.debugDescription)
    }
}
