import ConfabProtocol
import Foundation
import XCTest

private let guardedTool = """
    [tools.guarded]
    description = "Echo what it is given, once somebody allows it"
    parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
    approval = "always"
    [tools.guarded.request]
    method = "GET"
    url = "$UPSTREAM/tool/echo?x=2"

    [profiles.helper]
    tools = ["guarded"]

    """

/// attach tells the terminal when confab needs the person: the exact sequences it writes,
/// recorded by `script` on a pty of its own inside a tmux pane.
final class NotificationTests: TmuxTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try harness.writeConfig(guardedTool)
        try harness.restartDaemon()
    }

    /// The client's config directory (`XDG_CONFIG_HOME`): the test's own, so that no file of
    /// the machine's decides; `[client]` is written there by the tests that need it.
    private var configHome: String { harness.directory + "/client-config" }

    private func writeClientConfig(_ text: String) throws {
        try FileManager.default.createDirectory(atPath: configHome + "/confab", withIntermediateDirectories: true)
        try text.write(toFile: configHome + "/confab/config.toml", atomically: true, encoding: .utf8)
    }

    /// attach in `script`, which records every byte it writes; the recording's path.
    private func attach(_ id: String, environment: String, in pane: inout String) throws -> String {
        let recording = harness.directory + "/recording-\(UUID().uuidString.prefix(8))"
        let command = harness.confabCommand(["attach", id, "--name", "ana"])
        let home = "export XDG_CONFIG_HOME=\(Tmux.quoted(configHome));"
        pane = try tmux.start("export NO_COLOR=1; \(home) \(environment) script -q -f -e -c \(Tmux.quoted(command)) \(Tmux.quoted(recording))",
                              width: 120, height: 30)
        try tmux.waitForText(pane, "here: ana (you)")
        return recording
    }

    @discardableResult
    private func waitForRecording(_ path: String, toContain text: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let deadline = Date().addingTimeInterval(15)
        var recorded = ""
        while Date() < deadline {
            recorded = String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
            if recorded.contains(text) { return recorded }
            usleep(20_000)
        }
        XCTFail("the recording never held \(text.debugDescription):\n\(recorded.debugDescription)", file: file, line: line)
        throw HarnessError(description: "no \(text.debugDescription) in the recording")
    }

    private func new(_ title: String) throws -> String {
        let client = try harness.client()
        let made = try client.call("conversation.create", ["title": .string(title), "profile": "helper"])
        return try XCTUnwrap(made["conversation"]?["id"]?.string)
    }

    func testAnApprovalAndAReplysEndAreNotifiedThroughTmuxsPassthrough() throws {
        let id = try new("chat")
        var pane = ""
        let recording = try attach(id, environment: "export CONFAB_NOTIFY=osc9 CONFAB_NOTIFY_IDLE=0;", in: &pane)
        try tmux.type(pane, "first [[tool:guarded {\"city\":\"Paris\"}]]")
        try tmux.send(pane, ["Enter"])
        try waitForRecording(recording, toContain: "\u{1B}Ptmux;\u{1B}\u{1B}]9;confab: guarded waits for your approval in “chat”\u{07}\u{1B}\\")
        try tmux.type(pane, "y")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "tool results: [guarded]")
        try waitForRecording(recording, toContain: "\u{1B}Ptmux;\u{1B}\u{1B}]9;confab: the reply is complete in “chat”\u{07}\u{1B}\\")
    }

    func testOutsideTmuxOSC777CarriesNoControlByteOfATitle() throws {
        let id = try new("evil\u{1B}]0;pwned\u{07}; x\u{9B}2J")
        var pane = ""
        let recording = try attach(id, environment: "unset TMUX; export CONFAB_NOTIFY=osc777 CONFAB_NOTIFY_IDLE=0;", in: &pane)
        let client = try harness.client()
        _ = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:done here]]"])
        let recorded = try waitForRecording(recording, toContain: "\u{1B}]777;notify;confab;the reply is complete in “evil ]0 pwned x 2J”\u{07}")
        XCTAssertFalse(recorded.contains("\u{1B}]0;"), recorded.debugDescription)
        XCTAssertFalse(recorded.contains("\u{1B}Ptmux;"), recorded.debugDescription)
    }

    func testAReplyEndWhileSomebodyTypesIsNotNotified() throws {
        let id = try new("chat")
        var pane = ""
        let recording = try attach(id, environment: "export CONFAB_NOTIFY=osc9 CONFAB_NOTIFY_IDLE=600;", in: &pane)
        try tmux.type(pane, "[[reply:seen as it came]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: seen as it came")
        // An approval is said however busy the screen is; the reply's end was watched.
        try tmux.type(pane, "second [[tool:guarded {\"city\":\"Oslo\"}]]")
        try tmux.send(pane, ["Enter"])
        let recorded = try waitForRecording(recording, toContain: "]9;confab: guarded waits for your approval in “chat”")
        XCTAssertFalse(recorded.contains("the reply is complete"), recorded.debugDescription)
    }

    /// `[client]` of the config file chooses the kind and the idle time when the environment
    /// says nothing.
    func testTheConfigFilesChoiceReachesTheScreen() throws {
        try writeClientConfig("[client]\nnotify = \"osc777\"\nnotify_idle_seconds = 0\n")
        let id = try new("chat")
        var pane = ""
        let recording = try attach(id, environment: "unset TMUX CONFAB_NOTIFY CONFAB_NOTIFY_IDLE;", in: &pane)
        let client = try harness.client()
        _ = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:done here]]"])
        let recorded = try waitForRecording(recording, toContain: "\u{1B}]777;notify;confab;the reply is complete in “chat”\u{07}")
        XCTAssertFalse(recorded.contains("]9;"), recorded.debugDescription)
    }

    /// The environment wins over the file: its kind, and its idle time.
    func testTheEnvironmentOverridesTheConfigFile() throws {
        try writeClientConfig("[client]\nnotify = \"osc777\"\nnotify_idle_seconds = 600\n")
        let id = try new("chat")
        var pane = ""
        let recording = try attach(id, environment: "unset TMUX; export CONFAB_NOTIFY=osc9 CONFAB_NOTIFY_IDLE=0;", in: &pane)
        let client = try harness.client()
        _ = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:done here]]"])
        let recorded = try waitForRecording(recording, toContain: "\u{1B}]9;confab: the reply is complete in “chat”\u{07}")
        XCTAssertFalse(recorded.contains("]777;"), recorded.debugDescription)
    }

    /// A mistake in `[client]` is said with the file and line, and attach goes on without it.
    func testAMistakeInTheFileIsSaidWithItsLine() throws {
        try writeClientConfig("[client]\nnotfy = \"osc9\"\n")
        let id = try new("chat")
        var pane = ""
        let recording = try attach(id, environment: "unset TMUX CONFAB_NOTIFY; export CONFAB_NOTIFY_IDLE=0;", in: &pane)
        // The line is wrapped at the terminal's width, as every error line is.
        let recorded = try waitForRecording(recording, toContain: "/confab/config.toml: unknown keys: client.notfy (line 2; did you mean")
        XCTAssertTrue(recorded.replacingOccurrences(of: "\r\n  ", with: " ").contains("(line 2; did you mean client.notify?)"),
                      recorded.debugDescription)
    }

    func testNoNotificationWhereTheTerminalIsNotKnownToTakeOne() throws {
        let id = try new("chat")
        var pane = ""
        let recording = try attach(id, environment: "unset CONFAB_NOTIFY TERM_PROGRAM; export CONFAB_NOTIFY_IDLE=0;", in: &pane)
        try tmux.type(pane, "first [[tool:guarded {\"city\":\"Paris\"}]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "needs your approval")
        try tmux.type(pane, "y")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "tool results: [guarded]")
        // Everything on the screen was written by then: the recording is whole up to it.
        let recorded = try waitForRecording(recording, toContain: "tool results: [guarded]")
        XCTAssertFalse(recorded.contains("]9;"), recorded.debugDescription)
        XCTAssertFalse(recorded.contains("]777;"), recorded.debugDescription)
    }
}
