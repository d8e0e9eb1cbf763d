import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// MCP servers over their lives, against real servers: scripts/mcp-test-server.py on the
/// official Python SDK, `mcp-server-time` and `mcp-server-git`, from the virtual environment
/// `make test` sets up in .build/venv-mcp. A crash in the middle of a call and the restart
/// after it, giving up on a server that cannot run, `start = "always"`, per-tool approval,
/// progress, a changed tool list, and the `mcpServers` JSON file.
final class MCPLifecycleTests: XCTestCase {
    var harness: Harness!
    var markers = ""
    static var venv: String { MCPIntegrationTests.venv }
    static var root: String { MCPIntegrationTests.root }

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.venv + "/bin/mcp-server-git") else {
            throw unavailable("no MCP servers installed in \(Self.venv): `make test` sets them up (make .build/venv-mcp/.installed)")
        }
        var template = Array("/tmp/confab-mcplife-XXXXXX".utf8CString)
        markers = String(cString: try XCTUnwrap(mkdtemp(&template)))
    }

    override func tearDown() {
        harness?.tearDown()
        if !markers.isEmpty { try? FileManager.default.removeItem(atPath: markers) }
    }

    /// `[mcp.NAME]` running scripts/mcp-test-server.py, writing its markers to `markers/NAME`.
    private func testServer(_ name: String, _ extra: String = "") throws -> String {
        try FileManager.default.createDirectory(atPath: markers + "/" + name, withIntermediateDirectories: true)
        return """
            [mcp.\(name)]
            command = "\(Self.venv)/bin/python"
            args = ["\(Self.root)/scripts/mcp-test-server.py"]
            env = { CONFAB_MCP_MARKERS = "\(markers)/\(name)" }
            \(extra)

            """
    }

    private func profile(_ tools: [String]) -> String {
        "[profiles.helper]\ntools = [\(tools.map { "\"\($0)\"" }.joined(separator: ", "))]\n"
    }

    private func conversation() throws -> (RPCClient, String) {
        let client = try harness.client(name: "asker")
        let created = try client.call(RPCMethod.conversationCreate.rawValue, ["title": "mcp", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        return (client, id)
    }

    /// Sends `text` and follows its reply to its end: every notification on the way.
    private func ask(_ client: RPCClient, _ id: String, _ text: String) throws -> [(method: String, params: JSON)] {
        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": .string(text)], timeout: 60)
        let chain = MessageID.sequence(of: try XCTUnwrap(sent["reply"]?.string))
        return try client.collect(until: { method, params in
            guard method == RPCNotification.messageCompleted.rawValue || method == RPCNotification.messageFailed.rawValue,
                  let message = params["message"], message["role"]?.string == Role.assistant.rawValue,
                  let id = message["id"]?.string, MessageID.sequence(of: id) == chain else { return false }
            return message["status"]?.string != MessageStatus.complete.rawValue || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: 90)
    }

    private func toolResults(_ notes: [(method: String, params: JSON)]) -> [JSON] {
        notes.filter { $0.method == RPCNotification.toolCompleted.rawValue }.compactMap { $0.params["message"] }
    }

    private func waitForLog(_ text: String, seconds: Double = 60) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if harness.log().contains(text) { return true }
            usleep(20_000)
        }
        return false
    }

    private func marker(_ name: String, timeout: Double = 60) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: markers + "/" + name, encoding: .utf8) { return text }
            usleep(20_000)
        }
        return nil
    }

    /// The call in flight when the server dies fails `tool_connection`, saying so; the server
    /// is started again, and the next call runs on the new process.
    func testACrashMidCallFailsTheCallAndTheNextCallRunsOnARestartedServer() throws {
        harness = try Harness(config: try testServer("test", "approval = \"never\"") + profile(["test"]))
        let (client, id) = try conversation()
        let crashed = try XCTUnwrap(toolResults(try ask(client, id, #"[[tool:test__crash {}]]"#)).first)
        XCTAssertEqual(crashed["status"]?.string, MessageStatus.failed.rawValue, "\(crashed)")
        XCTAssertEqual(crashed["error"]?["code"]?.string, ReplyErrorCode.toolConnection.rawValue, "\(crashed)")
        XCTAssertTrue(crashed["content"]?.string?.contains("the server test failed during the call") ?? false, "\(crashed)")
        let first = try XCTUnwrap(marker("test/crashed").flatMap { Int32($0) })
        XCTAssertTrue(waitForLog("mcp=test restarting in 0.5 s (failure 1 in a row)"), harness.log())

        let answered = try XCTUnwrap(toolResults(try ask(client, id, #"[[tool:test__echo {"text":"again"}]]"#)).first)
        XCTAssertEqual(answered["status"]?.string, MessageStatus.complete.rawValue, "\(answered)")
        XCTAssertEqual(answered["content"]?.string, "again")
        let second = try XCTUnwrap(marker("test/pid").flatMap { Int32($0) })
        XCTAssertNotEqual(first, second, "the call ran on a new process")
    }

    /// A server that exits as soon as it starts is restarted with growing delays, then given
    /// up on, with its last error, after five failures in a row; `start = "always"` starts it
    /// with the daemon, before any conversation.
    func testAServerThatCannotRunIsGivenUpOnAfterFiveFailuresInARow() throws {
        // Each start appends the system's uptime (CLOCK_BOOTTIME, 10 ms steps) to a file: the
        // delays are timed as the server saw its starts, not read from the daemon's log.
        let starts = NSTemporaryDirectory() + "confab-mcp-starts-\(getpid())-\(UInt64.random(in: 0..<UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: starts) }
        let config = """
            [mcp.broken]
            command = "/bin/sh"
            args = ["-c", "read up idle < /proc/uptime; echo \\"$$ $up\\" >> \(starts); echo 'not a server' >&2; exit 7"]
            start = "always"

            """ + profile(["broken"])
        harness = try Harness(config: config)
        XCTAssertTrue(waitForLog("mcp=broken gave up after 5 failures in a row"), harness.log())
        let lines = try String(contentsOfFile: starts, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 5, "five starts, then given up: \(lines)")
        XCTAssertEqual(Set(lines.map { $0.split(separator: " ").first }).count, lines.count, "a new process each time: \(lines)")
        let times = lines.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        // Between starts, at least the delay (0.5, 1, 2, 4 s): a timer does not fire early, so
        // the bound holds on any machine, less the clock's 10 ms step. Each delay's own bound,
        // so delays out of order fail too. Above: only a guard (a loaded 2-core machine may
        // take seconds to start a shell), 30 s, the longest delay there is.
        for (k, delay) in [0.5, 1.0, 2.0, 4.0].enumerated() where k + 1 < times.count {
            let gap = times[k + 1] - times[k]
            XCTAssertGreaterThanOrEqual(gap, delay - 0.02, "start \(k + 2) came \(gap) s after start \(k + 1): \(lines)")
            XCTAssertLessThan(gap, delay + 30, "start \(k + 2) came \(gap) s after start \(k + 1): \(lines)")
        }
        XCTAssertFalse(harness.log().contains("failure 5 in a row"), harness.log())

        // A reload is the user's word that something changed: the server is tried again.
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(60)
        func started() -> Int { ((try? String(contentsOfFile: starts, encoding: .utf8)) ?? "").split(separator: "\n").count }
        while started() < 6, Date() < deadline { usleep(20_000) }
        XCTAssertEqual(started(), 6, harness.log())
    }

    /// `start = "always"` starts a server when the daemon starts, and when a reload adds one,
    /// with no conversation asking for it.
    func testStartAlwaysStartsServersWithTheDaemonAndOnTheReloadThatAddsThem() throws {
        let early = try testServer("early", "start = \"always\"")
        let lazy = try testServer("lazy")
        harness = try Harness(config: early + lazy + profile(["early", "lazy"]))
        XCTAssertNotNil(marker("early/pid"), harness.log())
        XCTAssertTrue(waitForLog("mcp=early ready"), harness.log())
        XCTAssertFalse(FileManager.default.fileExists(atPath: markers + "/lazy/pid"), "a server of start = \"on_demand\" waits for a conversation")

        try harness.writeConfig(early + lazy + (try testServer("added", "start = \"always\"")) + profile(["early", "lazy"]))
        harness.daemon?.signal(SIGHUP)
        XCTAssertNotNil(marker("added/pid"), harness.log())
        XCTAssertFalse(FileManager.default.fileExists(atPath: markers + "/lazy/pid"))
    }

    /// `tool_approval` overrides the server's `approval` for single tools; a name the server
    /// does not list is warned of once it lists its tools.
    func testToolApprovalOverridesTheServersApprovalForOneTool() throws {
        harness = try Harness(config: try testServer("test", """
            approval = "never"
            tool_approval = { echo = "always", no_such_tool = "never" }
            """) + profile(["test"]))
        let (client, id) = try conversation()
        let notes = try ask(client, id, #"[[tool:test__fail {"reason":"no yes needed"}]]"#)
        XCTAssertFalse(notes.contains { $0.method == RPCNotification.toolApprovalRequested.rawValue })
        XCTAssertEqual(toolResults(notes).first?["error"]?["code"]?.string, ReplyErrorCode.toolError.rawValue)
        XCTAssertTrue(waitForLog("mcp=test the config names tools the server does not list: no_such_tool"), harness.log())

        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": #"[[tool:test__echo {"text":"asks"}]]"#])
        XCTAssertNotNil(sent["reply"]?.string)
        let requested = try client.collect(until: { method, _ in method == RPCNotification.toolApprovalRequested.rawValue }, timeout: 60)
        XCTAssertEqual(requested.last?.params["tool"]?.string, "test__echo")
        XCTAssertFalse(FileManager.default.fileExists(atPath: markers + "/test/called"), "nothing is called before the yes")
    }

    /// A tool's progress reaches the attached clients as `tool.progress`, its words escaped,
    /// throttled, and the last one before the call's `tool.completed`.
    func testProgressReachesAttachedClientsAndTheLastComesBeforeTheResult() throws {
        harness = try Harness(config: try testServer("test", "approval = \"never\"") + profile(["test"]))
        let (client, id) = try conversation()
        let watcher = try harness.client(name: "watcher")
        try watcher.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        let notes = try ask(client, id, #"[[tool:test__count {"steps":40}]]"#)
        let started = try XCTUnwrap(notes.first { $0.method == RPCNotification.toolStarted.rawValue }?.params)
        let progress = notes.enumerated().filter { $0.element.method == RPCNotification.toolProgress.rawValue }
        let completed = try XCTUnwrap(notes.firstIndex { $0.method == RPCNotification.toolCompleted.rawValue })
        let last = try XCTUnwrap(progress.last)
        XCTAssertLessThan(last.offset, completed, "the last progress comes before the result")
        XCTAssertLessThan(progress.count, 40, "reports within 250 ms of each other are held back")
        XCTAssertEqual(last.element.params["progress"]?.int, 40)
        XCTAssertEqual(last.element.params["total"]?.int, 40)
        XCTAssertEqual(last.element.params["text"]?.string, "counting ?[31m40", "control characters never reach a client")
        XCTAssertEqual(last.element.params["message"]?.string, started["message"]?["id"]?.string)
        XCTAssertEqual(last.element.params["call"]?.string, started["call"]?["id"]?.string)
        XCTAssertEqual(last.element.params["tool"]?.string, "test__count")
        XCTAssertEqual(toolResults(notes).first?["content"]?.string, "counted to 40")
        // The other attached client is told as well.
        let seen = try watcher.collect(until: { method, _ in method == RPCNotification.toolCompleted.rawValue }, timeout: 60)
        XCTAssertEqual(seen.last { $0.method == RPCNotification.toolProgress.rawValue }?.params["progress"]?.int, 40)
    }

    /// A tool that adds a tool and sends `notifications/tools/list_changed`: the next turn
    /// offers the new tool.
    func testAChangedToolListIsOfferedOnTheNextTurn() throws {
        harness = try Harness(config: try testServer("test", "approval = \"never\"") + profile(["test"]))
        let (client, id) = try conversation()
        _ = try ask(client, id, #"[[tool:test__grow {}]]"#)
        XCTAssertTrue(waitForLog("mcp=test tool list changed"), harness.log())
        let result = try XCTUnwrap(toolResults(try ask(client, id, #"[[tool:test__added {"text":"new"}]]"#)).first)
        XCTAssertEqual(result["content"]?.string, "added: new", "\(result)")
    }

    /// `mcp_servers_file`: the JSON other MCP clients read, with mcp-server-time and
    /// mcp-server-git (on a temporary repository), a disabled entry and another client's keys.
    func testTheMCPServersJSONFileRunsTheTimeAndGitServers() throws {
        let repository = markers + "/repo"
        try FileManager.default.createDirectory(atPath: repository, withIntermediateDirectories: true)
        for arguments in [["init", "-q"], ["-c", "user.name=Tester", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "the first commit"]] {
            let git = Process()
            git.executableURL = URL(fileURLWithPath: "/usr/bin/git")
            git.arguments = arguments
            git.currentDirectoryURL = URL(fileURLWithPath: repository)
            try git.run()
            git.waitUntilExit()
            XCTAssertEqual(git.terminationStatus, 0, "git \(arguments)")
        }
        let file = markers + "/servers.json"
        try """
            {"mcpServers": {
              "time": {"command": "\(Self.venv)/bin/mcp-server-time", "args": ["--local-timezone", "UTC"], "autoApprove": ["get_current_time"]},
              "git": {"type": "stdio", "command": "\(Self.venv)/bin/mcp-server-git", "args": ["--repository", "\(repository)"],
                      "env": {"GIT_TERMINAL_PROMPT": "0"}, "autoApprove": ["git_log", "git_status"], "alwaysAllow": []},
              "off": {"command": "/nonexistent", "disabled": true}
            }}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        harness = try Harness(config: profile(["time", "git"]), topLevel: "mcp_servers_file = \"\(file)\"")
        XCTAssertTrue(waitForLog("ignored keys this daemon does not use: mcpServers.git.alwaysAllow"), harness.log())
        let (client, id) = try conversation()
        let notes = try ask(client, id, #"[[tool:time__get_current_time {"timezone":"UTC"}]] [[tool:git__git_log {"repo_path":"\#(repository)"}]]"#)
        let results = toolResults(notes)
        XCTAssertEqual(results.count, 2, "\(notes)")
        for result in results { XCTAssertEqual(result["status"]?.string, MessageStatus.complete.rawValue, "\(result)") }
        XCTAssertTrue(results.contains { $0["content"]?.string?.contains("\"timezone\"") ?? false }, "\(results)")
        XCTAssertTrue(results.contains { $0["content"]?.string?.contains("the first commit") ?? false }, "\(results)")
        XCTAssertFalse(harness.log().contains("mcp=off"), "a disabled entry is not run")

        // The file is read again on SIGHUP: an entry this daemon cannot speak to is refused,
        // naming it, and nothing changes; dropping the time server stops it.
        try #"{"mcpServers": {"web": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        harness.daemon?.signal(SIGHUP)
        XCTAssertTrue(waitForLog("config reload rejected"), harness.log())
        XCTAssertTrue(harness.log().contains("\(file): mcpServers.web.type is \"sse\""), harness.log())
        try #"{"mcpServers": {"git": {"command": "\#(Self.venv)/bin/mcp-server-git", "args": ["--repository", "\#(repository)"]}}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        try harness.writeConfig(profile(["git"]), topLevel: "mcp_servers_file = \"\(file)\"")
        harness.daemon?.signal(SIGHUP)
        XCTAssertTrue(waitForLog("mcp=time no longer configured as it runs: stopping it"), harness.log())
        XCTAssertTrue(waitForLog("mcp=git no longer configured as it runs: stopping it"), "its env and autoApprove went: \(harness.log())")
    }

    /// An `mcpServers` entry over HTTP (`url`, `headers`) is a server over Streamable HTTP: its
    /// calls reach the SDK's HTTP server, and its Authorization header is a secret.
    func testAnMCPServersEntryOverHTTPReachesTheServerWithItsHeaders() throws {
        let directory = markers + "/web"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let server = try Child(Self.venv + "/bin/python", [Self.root + "/scripts/mcp-http-test-server.py", "--markers", directory],
                               logFile: markers + "/web.log")
        defer { server.stop() }
        let deadline = Date().addingTimeInterval(60)
        var port: Int?
        while port == nil, server.process.isRunning, Date() < deadline {
            port = (try? String(contentsOfFile: directory + "/port", encoding: .utf8)).flatMap { Int($0) }
            usleep(20_000)
        }
        let bound = try XCTUnwrap(port, "the HTTP test server did not start")
        let token = "tok-json-5e8a61c2f09b"
        let file = markers + "/servers.json"
        try """
            {"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:\(bound)/mcp",
                                    "headers": {"Authorization": "Bearer \(token)"}, "autoApprove": ["echo", "authorization"]}}}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        harness = try Harness(config: profile(["web"]), topLevel: "mcp_servers_file = \"\(file)\"")
        let (client, id) = try conversation()
        let results = toolResults(try ask(client, id, #"[[tool:web__echo {"text":"over http"}]] [[tool:web__authorization {}]]"#))
        XCTAssertEqual(results.map { $0["status"]?.string }, [MessageStatus.complete.rawValue, MessageStatus.complete.rawValue], "\(results)")
        // Calls end in any order. The server says back the header it got, which is redacted as a secret.
        XCTAssertEqual(Set(results.compactMap { $0["content"]?.string }), ["over http", "Authorization: [secret]"], "\(results)")
        XCTAssertFalse(harness.log().contains(token))
    }
}

/// A call's progress as a person sees it: the status row of `confab attach`.
final class MCPProgressScreenTests: TmuxTestCase {
    func testAttachShowsACallsProgressOnItsStatusRowEscaped() throws {
        guard FileManager.default.isExecutableFile(atPath: MCPIntegrationTests.venv + "/bin/python") else {
            throw unavailable("no MCP servers installed in \(MCPIntegrationTests.venv): `make test` sets them up")
        }
        let markers = harness.directory + "/markers"
        try FileManager.default.createDirectory(atPath: markers, withIntermediateDirectories: true)
        try harness.writeConfig("""
            [mcp.test]
            command = "\(MCPIntegrationTests.venv)/bin/python"
            args = ["\(MCPIntegrationTests.root)/scripts/mcp-test-server.py"]
            env = { CONFAB_MCP_MARKERS = "\(markers)" }
            approval = "never"

            [profiles.helper]
            tools = ["test"]
            """)
        try harness.restartDaemon()
        let made = try harness.runClient(["new", "--profile", "helper", "--title", "progress"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let id = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 120, height: 30)
        try tmux.waitForText(pane, "here: ana (you)", timeout: 30)
        try tmux.type(pane, #"count [[tool:test__count {"steps":3,"hold":true}]]"#)
        try tmux.send(pane, ["Enter"])
        // The tool holds after its last report until released: the row stays until then.
        let screen = try tmux.waitForText(pane, "running tool test__count: 3/3 counting ?[31m3", timeout: 60)
        XCTAssertFalse(try tmux.screen(pane, escapes: true).contains("\u{1B}[31m3"), screen)
        try "go".write(toFile: markers + "/release", atomically: true, encoding: .utf8)
        try tmux.waitForText(pane, "counted to 3", timeout: 60)
    }
}
