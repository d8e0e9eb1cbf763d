import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What following a reply tells the person at its edges: one line per retry and the error
/// once, a reply cut off by the length limit marked everywhere, and a daemon that restarts
/// under `ask` and `attach`.
final class FollowingTests: TmuxTestCase {
    override func setUpWithError() throws {
        harness = try Harness(retries: 2)
        tmux = Tmux(directory: harness.directory)
    }

    private func newConversation(_ title: String = "following") throws -> String {
        try harness.runClient(["new", "--title", title]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    /// A 500 with a long body of many lines, twice retried: each retry is one short line, the
    /// final error is said once with the body's first line; the whole body stays in the message.
    func testRetriesAreOneShortLineEachAndTheErrorIsSaidOnce() throws {
        let id = try newConversation()
        let asked = try harness.runClient(["ask", "-c", id, "[[status:500]] [[error-lines:7]]"])
        XCTAssertEqual(asked.status, 1, asked.stderr)
        let lines = asked.stderr.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { $0.contains("retry") }.count, 2, asked.stderr)
        XCTAssertEqual(lines.count, 3, "two retries and the error, one line each:\n\(asked.stderr)")
        XCTAssertEqual(asked.stderr.components(separatedBy: "fake upstream error 500").count - 1, 1, asked.stderr)
        XCTAssertTrue(lines.last?.hasPrefix("confab: the reply failed: the model server answered with an error (HTTP 500: fake upstream error 500") ?? false,
                      asked.stderr)
        XCTAssertFalse(asked.stderr.contains("detail line"), asked.stderr)
        let stored = try history(id).last
        XCTAssertEqual(stored?["status"]?.string, "failed")
        XCTAssertTrue(stored?["error"]?["message"]?.string?.contains("detail line 6") ?? false, "\(stored?.text ?? "")")
        XCTAssertTrue(harness.log().contains("failed: upstream_http status=500: fake upstream error 500\\n  messages.1.content"), "one line in the log, the whole text")
        XCTAssertTrue(harness.log().contains("detail line 6"))
    }

    /// `[cut off at the length limit: …]` under the reply in `show` and `attach`, and in `ask`
    /// a line on standard error and exit status 4; a continued reply that ends loses it.
    func testAReplyCutOffAtTheLengthLimitIsMarkedOnEverySurface() throws {
        let id = try newConversation()
        let marker = "[cut off at the length limit: /continue, confab continue \(id)]"
        let asked = try harness.runClient(["ask", "-c", id, "[[reply:cut short]] [[finish:length]]"])
        XCTAssertEqual(asked.status, 4, asked.stderr)
        XCTAssertEqual(asked.stdout, "cut short\n")
        XCTAssertEqual(asked.stderr, "confab: the reply was cut off at the model's length limit; confab continue \(id) goes on with it\n")

        let shown = try harness.runClient(["show", id])
        XCTAssertTrue(shown.stdout.contains("cut short\n" + marker + "\n"), shown.stdout)
        let attached = try harness.runClient(["attach", id])
        XCTAssertEqual(attached.status, 0, attached.stderr)
        XCTAssertTrue(attached.stdout.contains("cut short " + marker), attached.stdout)

        let pane = try tmux.start(harness.confabCommand(["attach", id]), width: 120)
        try tmux.waitForText(pane, "cut short " + marker)
        try tmux.send(pane, ["C-d"])
        try tmux.waitForText(pane, "[exit 0]")

        XCTAssertEqual(try harness.runClient(["continue", id]).status, 0)
        XCTAssertFalse(try harness.runClient(["show", id]).stdout.contains("cut off at the length limit"))
    }

    /// `ask` whose reply waits behind another when confabd restarts: it says the daemon is
    /// gone, waits, and prints the reply when it runs after the restart.
    func testAskWaitingForAReplyReconnectsAfterARestartAndPrintsIt() throws {
        let id = try newConversation()
        let other = try harness.client()
        _ = try other.call("message.send", ["conversation": .string(id), "content": "[[words:400]] [[delay:25]]"])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.path("confab"))
        process.arguments = ["--socket", harness.socketPath, "ask", "-c", id, "[[reply:the answer after the restart]]"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Its send is queued behind the slow reply before the daemon goes.
        let deadline = Date().addingTimeInterval(15)
        while try other.call("status")["queued"]?.int != 1 {
            XCTAssertLessThan(Date(), deadline, "the ask's send was never queued")
            if Date() > deadline { break }
            usleep(20_000)
        }
        other.close()
        try harness.restartDaemon()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertEqual(String(decoding: stdout, as: UTF8.self), "the answer after the restart\n")
        XCTAssertTrue(stderr.contains("waiting for it to come back"), stderr)
        XCTAssertTrue(stderr.contains("confabd is back"), stderr)
    }

    /// A screen that attaches while a call waits for a yes asks about it with its arguments
    /// (from the turn that made the call, in the history), and its answer lets the reply end.
    func testAttachingWhileACallWaitsAsksAboutItWhole() throws {
        try harness.writeConfig("""
            [tools.guarded]
            description = "Echo what it is given, once somebody allows it"
            parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
            approval = "always"
            [tools.guarded.request]
            method = "GET"
            url = "$UPSTREAM/tool/echo?x=2"

            [profiles.helper]
            tools = ["guarded"]

            """)
        try harness.restartDaemon()
        let id = try harness.runClient(["new", "--profile", "helper", "--title", "late"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let watcher = try harness.client()
        _ = try watcher.call("conversation.attach", ["conversation": .string(id), "history": 0])
        _ = try watcher.call("message.send", ["conversation": .string(id), "content": #"go [[tool:guarded {"city":"Paris"}]]"#])
        _ = try watcher.collect(until: { method, _ in method == "tool.approval_requested" })
        let pane = try tmux.start(harness.confabCommand(["attach", id]), width: 140)
        try tmux.waitForText(pane, #"⚙ guarded {"city":"Paris"} needs your approval"#)
        try tmux.type(pane, "y")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "tool results: [guarded]")
        try tmux.send(pane, ["C-d"])
        try tmux.waitForText(pane, "[exit 0]")
    }

    /// attach when confabd restarts: says it is gone, comes back by itself, shows the reply
    /// that ran meanwhile, and goes on (a line typed is sent and answered); Ctrl-D leaves.
    func testAttachSurvivesARestartAndShowsWhatItMissed() throws {
        let id = try newConversation()
        let pane = try tmux.start(harness.confabCommand(["attach", id]), width: 120)
        try tmux.waitForText(pane, "here: ")
        // A send queued at the stop runs at the next start, whether or not we are back yet.
        let other = try harness.client()
        _ = try other.call("message.send", ["conversation": .string(id), "content": "[[words:400]] [[delay:25]]"])
        _ = try other.call("message.send", ["conversation": .string(id), "content": "[[reply:answered while away]]"])
        try tmux.waitForText(pane, "w3 ")
        other.close()
        try harness.restartDaemon()
        try tmux.waitForText(pane, "waiting for it to come back (Ctrl-D leaves)")
        try tmux.waitForText(pane, "-- confabd is back", timeout: 30)
        try tmux.waitForText(pane, "assistant: answered while away", timeout: 30)
        try tmux.type(pane, "still there? [[reply:yes, still here]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: yes, still here")
        try tmux.send(pane, ["C-d"])
        try tmux.waitForText(pane, "[exit 0]")
    }
}
