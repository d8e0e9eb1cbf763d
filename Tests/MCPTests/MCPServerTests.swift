import ConfabProtocol
import EventLoop
import Foundation
import MCP
import ServiceSettings
import XCTest

/// `MCPServer` running a small scripted server (Python, as most MCP servers are) on the loop.
final class MCPServerTests: XCTestCase {
    /// Answers the handshake, lists `echo` and `slow`, echoes `echo`'s text, never answers
    /// `slow`, says on stderr what it was told, and exits when its stdin closes unless told
    /// to ignore that (`IGNORE_EOF`) and SIGTERM too.
    static let script = #"""
import json, os, signal, sys, time
if os.environ.get("IGNORE_EOF"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.stderr.write("secret=" + os.environ.get("CONFAB_TEST_SECRET", "none") + "\n"); sys.stderr.flush()
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    method, mid = m.get("method"), m.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}, {"name": "slow", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and m["params"]["arguments"].get("text") == "crash":
        os._exit(1)
    elif method == "tools/call" and m["params"]["name"] == "echo":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": m["params"]["arguments"]["text"]}]}})
    elif method == "notifications/cancelled":
        sys.stderr.write("cancelled " + str(m["params"]["requestId"]) + "\n"); sys.stderr.flush()
if os.environ.get("IGNORE_EOF"):
    while True: time.sleep(1)
"""#

    private var logs: [String] = []

    private func server(_ loop: Loop, environment: [String: String] = [:], timeoutSeconds: Int = 60) -> MCPServer {
        var daemonEnvironment = ProcessInfo.processInfo.environment
        daemonEnvironment["CONFAB_TEST_SECRET"] = "hunter2"
        let settings = MCPServerSettings(name: "scripted", command: "python3", arguments: ["-c", Self.script],
                                         environment: environment, passedEnvironment: MCPServerSettings.passed(from: daemonEnvironment),
                                         timeoutSeconds: timeoutSeconds)
        return MCPServer(settings: settings, loop: loop) { [unowned self] level, text in
            logs.append("\(level) \(text)")
        }
    }

    private func run(_ loop: Loop, until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(30)
        while !done(), Date() < deadline { _ = loop.runOnce(wait: false); usleep(1000) }
    }

    func testStartsOnFirstUseCallsAndStopsWhenItsInputCloses() throws {
        let loop = try Loop()
        let server = server(loop)
        XCTAssertEqual(server.status, .stopped)
        var status: MCPServer.Status?
        server.whenReady { status = $0 }
        run(loop) { status != nil }
        XCTAssertEqual(status, .ready)
        XCTAssertEqual(server.tools.map(\.name), ["echo", "slow"])
        var outcome: MCPCallOutcome?
        _ = server.call(tool: "echo", arguments: ["text": "hello"]) { outcome = $0 }
        run(loop) { outcome != nil }
        XCTAssertEqual(outcome, .answered(MCPToolResult(text: "hello", isError: false)))
        run(loop) { logs.contains { $0.contains("stderr: secret=") } }
        XCTAssertTrue(logs.contains("info stderr: secret=none"), "the daemon's own variables are not passed: \(logs)")
        var stopped = false
        server.stop(graceMilliseconds: 60_000) { stopped = true }
        run(loop) { stopped }
        XCTAssertTrue(stopped, "closing its input ended it, long before any signal")
        XCTAssertFalse(logs.contains { $0.contains("SIGTERM") })
        loop.close()
    }

    func testATimedOutCallIsCancelledAtTheServer() throws {
        let loop = try Loop()
        let server = server(loop, timeoutSeconds: 1)
        var outcome: MCPCallOutcome?
        _ = server.call(tool: "slow", arguments: [:]) { outcome = $0 }
        run(loop) { outcome != nil }
        XCTAssertEqual(outcome, .timedOut("the tool did not answer within 1 s"))
        run(loop) { logs.contains { $0.contains("stderr: cancelled") } }
        XCTAssertTrue(logs.contains("info stderr: cancelled 3"), "\(logs)")
        var stopped = false
        server.stop { stopped = true }
        run(loop) { stopped }
        loop.close()
    }

    func testAServerThatIgnoresItsInputClosingAndSIGTERMIsKilled() throws {
        let loop = try Loop()
        let server = server(loop, environment: ["IGNORE_EOF": "1"])
        var status: MCPServer.Status?
        server.whenReady { status = $0 }
        run(loop) { status != nil }
        XCTAssertEqual(status, .ready)
        var outcome: MCPCallOutcome?
        _ = server.call(tool: "slow", arguments: [:]) { outcome = $0 }
        let pid = try XCTUnwrap(server.pid)
        var stopped = false
        server.stop(graceMilliseconds: 200) { stopped = true }
        run(loop) { stopped }
        XCTAssertTrue(stopped)
        XCTAssertTrue(logs.contains { $0.contains("SIGKILL") }, "\(logs)")
        // Its output's end or its exit, whichever the loop sees first, ends a call in flight.
        guard case .failed = outcome else { return XCTFail("a call in flight ends when its server does: \(String(describing: outcome))") }
        XCTAssertNotEqual(kill(pid, 0), 0)
        loop.close()
    }

    func testACallInFlightFailsWhenTheServerCrashesAndTheNextCallStartsItAgain() throws {
        let loop = try Loop()
        let server = server(loop)
        var outcome: MCPCallOutcome?
        _ = server.call(tool: "echo", arguments: ["text": "crash"]) { outcome = $0 }
        run(loop) { outcome != nil }
        guard case .failed(let reason) = outcome else { return XCTFail("\(String(describing: outcome))") }
        XCTAssertTrue(reason.contains("exited") || reason.contains("closed its output"), reason)
        let first = server.pid
        outcome = nil
        _ = server.call(tool: "echo", arguments: ["text": "again"]) { outcome = $0 }
        run(loop) { outcome != nil }
        XCTAssertEqual(outcome, .answered(MCPToolResult(text: "again", isError: false)))
        XCTAssertNotEqual(server.pid, first)
        var stopped = false
        server.stop { stopped = true }
        run(loop) { stopped }
        loop.close()
    }

    /// A crash is restarted on its own after the first delay, with no call asking; `restart()`
    /// starts a new process at once, ends the calls in flight and forgets the failures.
    func testACrashedServerIsRestartedAfterADelayAndRestartStartsItNow() throws {
        let loop = try Loop()
        let server = server(loop)
        var outcome: MCPCallOutcome?
        _ = server.call(tool: "echo", arguments: ["text": "crash"]) { outcome = $0 }
        run(loop) { outcome != nil }
        guard case .failed(let reason) = outcome else { return XCTFail("\(String(describing: outcome))") }
        XCTAssertTrue(reason.hasPrefix("the server scripted failed during the call: "), reason)
        XCTAssertEqual(server.failuresInARow, 1)
        XCTAssertTrue(server.isWaitingToRestart)
        XCTAssertTrue(logs.contains { $0.hasPrefix("warning restarting in 0.5 s (failure 1 in a row): ") }, "\(logs)")
        run(loop) { server.status == .ready }
        XCTAssertEqual(server.status, .ready, "restarted with nobody asking: \(logs)")
        let restarted = try XCTUnwrap(server.pid)

        outcome = nil
        _ = server.call(tool: "slow", arguments: [:]) { outcome = $0 }
        // The call was sent at once: the server is ready.
        server.restart()
        XCTAssertEqual(server.failuresInARow, 0)
        run(loop) { outcome != nil && server.status == .ready }
        XCTAssertEqual(outcome, .failed("the server scripted failed during the call: the server was restarted"))
        XCTAssertNotEqual(server.pid, restarted)
        XCTAssertEqual(server.failuresInARow, 0, "a restart asked for is no failure")
        var stopped = false
        server.stop { stopped = true }
        run(loop) { stopped }
        loop.close()
    }

    func testAProgramThatIsNotThereFails() throws {
        let loop = try Loop()
        let server = MCPServer(settings: MCPServerSettings(name: "none", command: "confab-no-such-server",
                                                           passedEnvironment: ["PATH": "/usr/bin:/bin"]), loop: loop) { _, _ in }
        var status: MCPServer.Status?
        server.whenReady { status = $0 }
        guard case .failed(let reason) = status else { return XCTFail("\(String(describing: status))") }
        XCTAssertTrue(reason.contains("cannot start confab-no-such-server"), reason)
        loop.close()
    }

    /// A restart during start-up starts the start-up time again: the first start's deadline,
    /// passed while the second start is still under way, does not fail it.
    func testARestartDuringStartUpIsNotFailedByTheFirstStartsDeadline() throws {
        let loop = try Loop()
        var settings = MCPServerSettings(name: "mute", command: "python3", arguments: ["-c", "import sys\nfor line in sys.stdin: pass"],
                                         passedEnvironment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        settings.startupTimeoutSeconds = 4
        let server = MCPServer(settings: settings, loop: loop) { [unowned self] level, text in logs.append("\(level) \(text)") }
        var statuses: [MCPServer.Status] = []
        server.whenReady { statuses.append($0) }
        let firstStart = loop.now
        XCTAssertEqual(server.status, .starting)
        run(loop) { loop.now >= firstStart + 2000 }
        server.restart()
        let restartedAt = loop.now
        // Past the first start's deadline, well before the second's.
        run(loop) { loop.now >= firstStart + 4500 || server.status != .starting }
        if restartedAt + 4000 > loop.now {
            XCTAssertEqual(server.status, .starting, "the first start's deadline failed the second start: \(logs)")
        }
        run(loop) { server.status != .starting }
        XCTAssertEqual(server.status, .failed("the server did not finish starting within 4 s"))
        XCTAssertGreaterThanOrEqual(loop.now, restartedAt + 4000, "the second start had its own 4 s")
        var stopped = false
        server.stop(graceMilliseconds: 200) { stopped = true }
        run(loop) { stopped }
        loop.close()
    }

    /// A server that says its list changed each time it is listed: the log says so once in a while, not each time.
    func testAToolListChangedLoopDoesNotFloodTheLog() throws {
        let script = """
        import json, sys
        listed = 0
        def send(m):
            sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
        for line in sys.stdin:
            m = json.loads(line)
            if m.get("method") == "initialize":
                send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "loop", "version": "0"}}})
            elif m.get("method") == "tools/list":
                listed += 1
                send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "t%d" % i} for i in range(listed)]}})
                if listed < 100:
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        """
        let loop = try Loop()
        let settings = MCPServerSettings(name: "changing", command: "python3", arguments: ["-c", script],
                                         passedEnvironment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        let server = MCPServer(settings: settings, loop: loop) { [unowned self] level, text in logs.append("\(level) \(text)") }
        var changes = 0
        server.onToolsChanged = { changes += 1 }
        server.whenReady { _ in }
        run(loop) { server.tools.count == 100 || server.status != .ready && server.status != .starting }
        XCTAssertEqual(server.tools.count, 100, "\(logs)")
        XCTAssertEqual(changes, 99, "every change still reaches the daemon")
        let lines = logs.filter { $0.contains("tool list changed") }
        XCTAssertGreaterThanOrEqual(lines.count, 1)
        XCTAssertLessThanOrEqual(lines.count, 5, "\(lines)")
        var stopped = false
        server.stop(graceMilliseconds: 200) { stopped = true }
        run(loop) { stopped }
        loop.close()
    }

    static let hostileScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/mcp-hostile-server.py").path

    /// A server that floods pings and never reads its input (the daemon answers each ping):
    /// once more than the bound waits to be written to it, it has failed, saying why, and
    /// what waits is let go.
    func testAServerThatDoesNotReadItsInputFailsOnceTheAnswersWaitingPassTheBound() throws {
        // As in confabd: answers still queued for the ended server meet EPIPE, not SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let loop = try Loop()
        var markers = Array("/tmp/confab-flood-XXXXXX".utf8CString)
        let directory = String(cString: try XCTUnwrap(mkdtemp(&markers)))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let settings = MCPServerSettings(name: "flood", command: "python3", arguments: [Self.hostileScript, "--flood-pings", "200000"],
                                         environment: ["CONFAB_MCP_MARKERS": directory],
                                         passedEnvironment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        let server = MCPServer(settings: settings, loop: loop) { [unowned self] level, text in logs.append("\(level) \(text)") }
        server.whenReady { _ in }
        run(loop) { server.isWaitingToRestart || server.hasGivenUp }
        guard case .failed(let reason) = server.status else { return XCTFail("the flooding server did not fail: \(server.status) \(logs)") }
        XCTAssertEqual(reason, "the server does not read its input: more than 4 MiB or 1000 messages wait to be written to it")
        XCTAssertTrue(logs.contains("warning failed: \(reason)"), "\(logs.suffix(5))")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/flooded"), "the daemon did not read the whole flood")
        var stopped = false
        server.stop(graceMilliseconds: 200) { stopped = true }
        run(loop) { stopped }
        loop.close()
    }

    /// A `notifications/message` level is the server's text: shown short and escaped.
    func testALogLevelIsCutAndEscaped() {
        XCTAssertEqual(MCPServer.shownLogLevel("warning"), "warning")
        XCTAssertEqual(MCPServer.shownLogLevel(String(repeating: "A", count: 100_000)), String(repeating: "A", count: 16) + "…")
        XCTAssertEqual(MCPServer.shownLogLevel("err\u{1B}[31m\n"), "err\\u{1b}[31m\\u{a}")
    }
}
