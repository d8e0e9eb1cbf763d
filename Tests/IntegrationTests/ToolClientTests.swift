import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Two tools over the fake upstream's `/tool/echo`, which answers with what it was asked;
/// `guarded` needs somebody's yes. The fake model asks for a tool when the last user message
/// holds `[[tool:NAME ARGS]]`, and answers the results with `tool results: [NAME] CONTENT`.
private let toolConfig = """
    [tools.echo]
    description = "Echo what it is given"
    parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
    approval = "never"
    [tools.echo.request]
    method = "GET"
    url = "$UPSTREAM/tool/echo?x=1"

    [tools.guarded]
    description = "Echo what it is given, once somebody allows it"
    parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
    approval = "always"
    [tools.guarded.request]
    method = "GET"
    url = "$UPSTREAM/tool/echo?x=2"

    [profiles.helper]
    tools = ["echo", "guarded"]

    """

/// Tool calls as people see them: in attach, where any screen approves them, and in ask.
final class ToolClientTests: TmuxTestCase {
    override func setUpWithError() throws {
        harness = try Harness()
        tmux = Tmux(directory: harness.directory)
        // A daemon without its tool loop does not know tool.approve: that is a failure, not
        // a reason to skip, since these tests are the only ones that see tools in the client.
        do {
            try harness.client().call(RPCMethod.toolApprove.rawValue, ["conversation": "0000000000aa", "call": "call_none", "allow": false])
        } catch let error as RPCError where error.code == RPCError.methodNotFound {
            XCTFail("confabd does not know tool.approve (-32601): its tool loop is missing")
            throw error
        } catch {
            // Any other refusal (no such conversation, no such call) means the method is there.
        }
        try harness.writeConfig(toolConfig)
        try harness.restartDaemon()
    }

    private func newConversation(_ title: String = "tools") throws -> String {
        let made = try harness.runClient(["new", "--profile", "helper", "--title", title])
        XCTAssertEqual(made.status, 0, made.stderr)
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    /// The history once the latest reply has ended: its last turn stored complete and asking
    /// for no more tools. A reply's first text is on screen long before its last arrives, and
    /// a step whose output must come after the reply's waits for this first.
    @discardableResult
    private func waitForReplyStored(_ id: String, messages count: Int, timeout: Double = 10,
                                    file: StaticString = #filePath, line: UInt = #line) throws -> [JSON] {
        let deadline = Date().addingTimeInterval(timeout)
        var messages: [JSON] = []
        while Date() < deadline {
            messages = try history(id)
            if messages.count >= count, let last = messages.last, last["role"]?.string == "assistant",
               last["status"]?.string == "complete", last["tool_calls"]?.array?.isEmpty ?? true {
                return messages
            }
            usleep(20_000)
        }
        XCTFail("no finished reply among \(count) messages within \(timeout) s: \(messages.map { $0["id"]?.string ?? "?" })",
                file: file, line: line)
        throw HarnessError(description: "the reply did not end")
    }

    private func count(_ text: String, in screen: String) -> Int { screen.components(separatedBy: text).count - 1 }

    private func enter(_ pane: String, _ text: String) throws {
        try tmux.type(pane, text)
        try tmux.send(pane, ["Enter"])
    }

    func testAttachShowsTheCallItsResultAndThenTheReply() throws {
        let id = try newConversation()
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 140, height: 40)
        try tmux.waitForText(pane, "here: ana (you)", timeout: 10)
        try enter(pane, "weather please [[tool:echo {\"city\":\"Paris\"}]]")
        try tmux.waitForText(pane, "⚙ echo {\"city\":\"Paris\"}", timeout: 10)
        try tmux.waitForText(pane, "⚙ echo → 200 · ", timeout: 10)
        let screen = try tmux.waitForText(pane, "tool results: [echo]", timeout: 10)
        let call = try XCTUnwrap(screen.range(of: "⚙ echo {\"city\":\"Paris\"}"))
        let result = try XCTUnwrap(screen.range(of: "⚙ echo → 200 · "))
        let reply = try XCTUnwrap(screen.range(of: "tool results: [echo]"))
        XCTAssertTrue(call.lowerBound < result.lowerBound && result.lowerBound < reply.lowerBound, screen)

        // One reply, four messages: the question, the turn asking for the tool, its result, the
        // answer (which may still be streaming when its first words show).
        let messages = try waitForReplyStored(id, messages: 4)
        XCTAssertEqual(messages.map { $0["id"]?.string }, ["m1", "m2", "m2.1", "m2.2"])
        XCTAssertEqual(messages.map { $0["role"]?.string }, ["user", "assistant", "tool", "assistant"])
        XCTAssertEqual(messages[1]["tool_calls"]?.array?.first?["name"]?.string, "echo")
        let content = try XCTUnwrap(messages[2]["content"]?.string)

        // /tool shows all the tool answered.
        try enter(pane, "/tool m2.1")
        try tmux.waitForText(pane, "-- m2.1 · call ", timeout: 10)
        let firstLine = content.split(separator: "\n").first.map { String($0.prefix(40)) } ?? ""
        try tmux.waitForText(pane, firstLine, timeout: 10)

        // A screen attaching afterwards reads the same chain from the history.
        let later = try tmux.start(harness.confabCommand(["attach", id, "--name", "bob"]), width: 140, height: 40)
        let seen = try tmux.waitForText(later, "tool results: [echo]", timeout: 10)
        XCTAssertTrue(seen.contains("⚙ echo {\"city\":\"Paris\"}"), seen)
        XCTAssertTrue(seen.contains("⚙ echo → 200 · "), seen)
    }

    func testAnotherScreenApprovesWithSlashApproveAndWithYAndDeniesWithN() throws {
        let id = try newConversation()
        let ana = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 140, height: 50)
        try tmux.waitForText(ana, "here: ana (you)", timeout: 10)
        let bob = try tmux.start(harness.confabCommand(["attach", id, "--name", "bob"]), width: 140, height: 50)
        try tmux.waitForText(bob, "here: bob (you)", timeout: 10)
        try tmux.waitForText(ana, "-- bob (root) joined --", timeout: 10)

        // /approve on the other screen.
        try enter(ana, "first [[tool:guarded {\"city\":\"Paris\"}]]")
        let question = "⚙ guarded {\"city\":\"Paris\"} needs your approval: y/n, or /approve "
        try tmux.waitForText(ana, question, timeout: 10)
        try tmux.waitForText(bob, question, timeout: 10)
        try enter(bob, "/approve")
        try tmux.waitForText(ana, "approved by bob (root) --", timeout: 10)
        try tmux.waitForText(bob, "approved by you --", timeout: 10)
        try tmux.waitForText(ana, "⚙ guarded → 200 · ", timeout: 10)
        try tmux.waitForText(ana, "tool results: [guarded]", timeout: 10)
        try waitForReplyStored(id, messages: 4)

        // Answering a call that has ended is a notice, and attach goes on.
        let firstCall = try XCTUnwrap(try history(id).first { $0["role"]?.string == "tool" }?["tool_call_id"]?.string)
        try enter(ana, "/approve \(firstCall)")
        try tmux.waitForScreen(ana, timeout: 10, "a notice that \(firstCall) is not waiting") { screen in
            screen.split(separator: "\n").contains { $0.hasPrefix("-- ") && $0.contains(firstCall) && !$0.contains("approved by") }
        }

        // y alone on the line.
        try enter(ana, "second [[tool:guarded {\"city\":\"Rome\"}]]")
        try tmux.waitForText(bob, "⚙ guarded {\"city\":\"Rome\"} needs your approval", timeout: 10)
        try enter(bob, "y")
        try tmux.waitForScreen(ana, timeout: 10, "a second approval and answer") { screen in
            self.count("approved by bob (root) --", in: screen) == 2 && self.count("tool results: [guarded]", in: screen) == 2
        }
        try waitForReplyStored(id, messages: 8)

        // n alone denies; the model is told and answers all the same.
        try enter(ana, "third [[tool:guarded {\"city\":\"Oslo\"}]]")
        try tmux.waitForText(bob, "⚙ guarded {\"city\":\"Oslo\"} needs your approval", timeout: 10)
        try enter(bob, "n")
        try tmux.waitForText(ana, "denied by bob (root) --", timeout: 10)
        try tmux.waitForText(ana, "⚙ guarded ✗ denied", timeout: 10)
        try tmux.waitForScreen(ana, timeout: 10, "the answer to the denied call") { self.count("tool results: [guarded]", in: $0) == 3 }
        try waitForReplyStored(id, messages: 12)
        try enter(bob, "/deny")
        try tmux.waitForText(bob, "no tool call is waiting for approval", timeout: 10)

        let tools = try history(id).filter { $0["role"]?.string == "tool" }
        XCTAssertEqual(tools.map { $0["approval"]?.string }, ["approved", "approved", "denied"])
        XCTAssertEqual(tools.map { $0["status"]?.string }, ["complete", "complete", "failed"])
        XCTAssertEqual(tools.last?["error"]?["code"]?.string, "tool_denied")
        // Nobody's "y" or "n" was sent as a message.
        XCTAssertEqual(try history(id).filter { $0["role"]?.string == "user" }.count, 3)
    }

    /// Arguments whose first value is 2,100 characters long: in a 54-column pane the approval
    /// line still shows every key, the call's id and how to answer, and /tool shows it all.
    func testAnApprovalInANarrowPaneShowsEveryArgumentAndHowToAnswer() throws {
        let id = try newConversation()
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 54, height: 70)
        try tmux.waitForText(pane, "here: ana (you)", timeout: 10)
        let arguments = "{\"city\":\"Paris\",\"query\":\"login page" + String(repeating: " ", count: 2100)
            + "\", \"state\":\"open\", \"admin_delete\":\"all-tickets\"}"
        let asked = try harness.client().call("message.send", ["conversation": .string(id), "content": .string("q [[tool:guarded \(arguments)]]")])
        XCTAssertNotNil(asked["message"], "\(asked)")
        func joined(_ screen: String) -> String {
            screen.split(whereSeparator: \.isWhitespace).joined(separator: " ").replacingOccurrences(of: ", ", with: ",")
        }
        let screen = try tmux.waitForScreen(pane, timeout: 10, "the approval line") { joined($0).contains("needs your approval: y/n,or /approve ") }
        let call = try XCTUnwrap(try history(id).last { $0["role"]?.string == "assistant" }?["tool_calls"]?.array?.first?["id"]?.string)
        XCTAssertTrue(joined(screen).contains("⚙ guarded {\"city\":\"Paris\",\"query\":\"login page …[2,110 characters]… \",\"state\":\"open\",\"admin_delete\":\"all-tickets\"} needs your approval: y/n,or /approve \(call),/deny \(call)"),
                      screen)
        for row in screen.split(separator: "\n") { XCTAssertLessThanOrEqual(row.count, 54) }

        try enter(pane, "/tool \(call)")
        let whole = try tmux.waitForScreen(pane, timeout: 10, "the arguments in full") { $0.contains("arguments in full:") && $0.contains("all-tickets\"}") }
        // Cut at the width, not between words: the 2,100 spaces fill rows of their own.
        let rows = whole[try XCTUnwrap(whole.range(of: "arguments in full:")).upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
        let first = try XCTUnwrap(rows.firstIndex { $0.hasSuffix("\"query\":\"login page") }, whole)
        let last = try XCTUnwrap(rows.firstIndex { $0.hasSuffix("\"all-tickets\"}") }, whole)
        XCTAssertGreaterThanOrEqual(last - first, 2100 / 54, whole)
        XCTAssertTrue(rows[first..<last].dropFirst().allSatisfy { $0.allSatisfy { $0 == " " } || $0.contains("\",\"state\"") || $0.contains("all-tickets") }, whole)
        try enter(pane, "n")
        try tmux.waitForText(pane, "⚙ guarded ✗ denied", timeout: 10)
    }

    func testAskWritesToolLinesToStandardErrorAndTheReplyToStandardOutput() throws {
        let asked = try harness.runClient(["ask", "--profile", "helper", "weather please [[tool:echo {\"city\":\"Paris\"}]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertTrue(asked.stdout.contains("tool results: [echo]"), asked.stdout)
        XCTAssertFalse(asked.stdout.contains("⚙"), asked.stdout)
        XCTAssertTrue(asked.stderr.contains("⚙ echo {\"city\":\"Paris\"} → 200 · "), asked.stderr)
        XCTAssertFalse(asked.stderr.contains("\u{1B}"), "plain when standard error is not a terminal: \(asked.stderr)")
    }

    /// No terminal at all: the prompt from a pipe, and no controlling terminal to open.
    func testAskDeniesACallWhenThereIsNoTerminalToAskOn() throws {
        let asked = try runWithoutTerminal(["ask", "--profile", "helper"], stdin: "weather please [[tool:guarded {\"city\":\"Paris\"}]]")
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertTrue(asked.stderr.contains("confab: denied tool call guarded: no terminal to ask on"), asked.stderr)
        XCTAssertTrue(asked.stderr.contains("⚙ guarded {\"city\":\"Paris\"} ✗ denied"), asked.stderr)
        XCTAssertTrue(asked.stdout.contains("tool results: [guarded]"), asked.stdout)
        let id = try XCTUnwrap(asked.stderr.split(separator: "\n").first { $0.hasPrefix("conversation ") }?.split(separator: " ").last)
        let tool = try XCTUnwrap(try history(String(id)).first { $0["role"]?.string == "tool" })
        XCTAssertEqual(tool["approval"]?.string, "denied")
        XCTAssertEqual(tool["error"]?["code"]?.string, "tool_denied")
    }

    /// On a terminal, ask asks; with the prompt from a pipe it asks on the terminal all the same.
    func testAskAsksOnTheTerminalEvenWhenThePromptComesFromAPipe() throws {
        let pane = try tmux.start(harness.confabCommand(["ask", "--profile", "helper", "q [[tool:guarded {\"city\":\"Paris\"}]]"]))
        try tmux.waitForText(pane, "guarded {\"city\":\"Paris\"} — allow? [y/N]", timeout: 10)
        try enter(pane, "y")
        try tmux.waitForText(pane, "⚙ guarded {\"city\":\"Paris\"} → 200 · ", timeout: 10)
        try tmux.waitForText(pane, "tool results: [guarded]", timeout: 10)
        try tmux.waitForText(pane, "[exit 0]", timeout: 10)

        let piped = try tmux.start("echo " + Tmux.quoted("q [[tool:guarded {\"city\":\"Rome\"}]]") + " | "
                                   + harness.confabCommand(["ask", "--profile", "helper"]))
        try tmux.waitForText(piped, "guarded {\"city\":\"Rome\"} — allow? [y/N]", timeout: 10)
        try enter(piped, "n")
        try tmux.waitForText(piped, "⚙ guarded {\"city\":\"Rome\"} ✗ denied", timeout: 10)
        try tmux.waitForText(piped, "[exit 0]", timeout: 10)
    }

    /// The client in a session of its own (setsid), so it has no controlling terminal, with
    /// `stdin` on a pipe and its output captured.
    private func runWithoutTerminal(_ arguments: [String], stdin: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let setsid = "/usr/bin/setsid"
        guard FileManager.default.isExecutableFile(atPath: setsid) else { throw unavailable("setsid (util-linux) is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: setsid)
        process.arguments = ["--wait", Binaries.path("confab"), "--socket", harness.socketPath] + arguments
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write(Data(stdin.utf8))
        try input.fileHandleForWriting.close()
        // Bounded: a client that waited for an answer nobody can give would hang the suite.
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            XCTFail("confab ask did not end within 20 s")
        }
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdoutData, as: UTF8.self), String(decoding: stderrData, as: UTF8.self))
    }
}
