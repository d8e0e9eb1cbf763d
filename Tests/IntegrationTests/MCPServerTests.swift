import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// MCP servers as tool sources against real servers over stdio: `mcp-server-time` from PyPI,
/// and scripts/mcp-test-server.py on the official Python SDK, both from the virtual
/// environment `make test` sets up in .build/venv-mcp. What every attached client sees, an
/// approval from another client, a tool's own error, cancel reaching the server, and no
/// server left behind by a confabd killed with SIGKILL.
final class MCPIntegrationTests: XCTestCase {
    var harness: Harness!
    var markers = ""

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let venv = ProcessInfo.processInfo.environment["CONFAB_MCP_VENV"] ?? root + "/.build/venv-mcp"

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.venv + "/bin/mcp-server-time") else {
            throw unavailable("no MCP servers installed in \(Self.venv): `make test` sets them up (make .build/venv-mcp/.installed)")
        }
        var template = Array("/tmp/confab-mcp-XXXXXX".utf8CString)
        markers = String(cString: try XCTUnwrap(mkdtemp(&template)))
        for server in ["test", "open"] { try FileManager.default.createDirectory(atPath: markers + "/" + server, withIntermediateDirectories: false) }
        harness = try Harness(config: config())
    }

    private func config(extra: String = "", tools: String = "") -> String {
        """
            [mcp.time]
            command = "\(Self.venv)/bin/mcp-server-time"
            args = ["--local-timezone", "UTC"]
            approval = "never"

            [mcp.test]
            command = "\(Self.venv)/bin/python"
            args = ["\(Self.root)/scripts/mcp-test-server.py"]
            env = { CONFAB_MCP_MARKERS = "\(markers)/test" }
            tools = ["echo", "fail", "slow"]

            [mcp.open]
            command = "\(Self.venv)/bin/python"
            args = ["\(Self.root)/scripts/mcp-test-server.py"]
            env = { CONFAB_MCP_MARKERS = "\(markers)/open" }
            approval = "never"

            \(extra)
            [profiles.helper]
            tools = ["time", "test.echo", "open.fail", "open.slow"\(tools)]
            """
    }

    override func tearDown() {
        harness?.tearDown()
        if !markers.isEmpty { try? FileManager.default.removeItem(atPath: markers) }
    }

    private func attachedPair() throws -> (RPCClient, RPCClient, String) {
        let asker = try harness.client(name: "asker")
        let watcher = try harness.client(name: "watcher")
        let created = try asker.call("conversation.create", ["title": "mcp", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try asker.call("conversation.attach", ["conversation": .string(id)])
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        return (asker, watcher, id)
    }

    /// Every notification of reply `reply`'s chain until a message of it ends without tool calls.
    private func follow(_ client: RPCClient, _ reply: String, timeout: Double = 60) throws -> [(method: String, params: JSON)] {
        let chain = MessageID.sequence(of: reply)
        return try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let id = message["id"]?.string, MessageID.sequence(of: id) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: timeout)
    }

    private func outline(_ notes: [(method: String, params: JSON)]) -> [String] {
        notes.compactMap { note in
            guard note.method != "message.delta", !note.method.hasPrefix("client.") else { return nil }
            let id = note.params["message"]?["id"]?.string ?? note.params["message"]?.string ?? note.params["call"]?.string ?? ""
            return "\(note.method) \(id)"
        }
    }

    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> String {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)], timeout: 60)
        return try XCTUnwrap(sent["reply"]?.string)
    }

    private func modelRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/completions") == true }
    }

    /// Waits (bounded) until `path` exists; its contents.
    private func marker(_ name: String, timeout: Double = 30) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: markers + "/" + name, encoding: .utf8) { return text }
            usleep(20_000)
        }
        return nil
    }

    func testACallToMCPServerTimeReachesTheModelAndEveryAttachedClientSeesTheSame() throws {
        let (asker, watcher, id) = try attachedPair()
        let reply = try send(asker, id, #"what time is it? [[tool:time__get_current_time {"timezone":"UTC"}]]"#)
        let seenByAsker = try follow(asker, reply)
        let seenByWatcher = try follow(watcher, reply)
        XCTAssertEqual(outline(seenByAsker), outline(seenByWatcher))
        XCTAssertEqual(outline(seenByWatcher).filter { $0.hasPrefix("tool.") }, ["tool.started m2.1", "tool.completed m2.1"])
        let result = try XCTUnwrap(seenByWatcher.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["status"]?.string, "complete", "\(result)")
        let content = try XCTUnwrap(result["content"]?.string)
        XCTAssertTrue(content.contains("\"timezone\"") && content.contains("UTC"), content)
        // The model was offered the server's tool under its model-facing name, and given the result.
        let requests = modelRequests()
        let offered = (requests.first?["body"]?["tools"]?.array ?? []).compactMap { $0["function"]?["name"]?.string }
        XCTAssertEqual(Set(offered), ["time__get_current_time", "time__convert_time", "test__echo", "open__fail", "open__slow"])
        let toolTurn = try XCTUnwrap(requests.last?["body"]?["messages"]?.array?.last)
        XCTAssertEqual(toolTurn["role"]?.string, "tool")
        XCTAssertEqual(toolTurn["content"]?.string, content)
    }

    func testACallWaitsForApprovalAndTheSecondClientApproves() throws {
        let (asker, watcher, id) = try attachedPair()
        let reply = try send(asker, id, #"[[tool:test__echo {"text":"approved by another"}]]"#)
        let requested = try watcher.collect(until: { method, _ in method == "tool.approval_requested" }, timeout: 60).last!.params
        let call = try XCTUnwrap(requested["call"]?.string)
        XCTAssertEqual(requested["tool"]?.string, "test__echo")
        XCTAssertEqual(requested["message"]?["approval"]?.string, "pending")
        XCTAssertFalse(FileManager.default.fileExists(atPath: markers + "/test/called"), "nothing is called before the yes")
        _ = try watcher.call("tool.approve", ["conversation": .string(id), "call": .string(call), "allow": true])
        let notes = try follow(asker, reply)
        let approved = try XCTUnwrap(notes.first { $0.method == "tool.approved" }?.params)
        XCTAssertEqual(approved["client"]?["name"]?.string, "watcher")
        let result = try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["status"]?.string, "complete")
        XCTAssertEqual(result["content"]?.string, "approved by another")
        XCTAssertEqual(marker("test/called"), "approved by another")
        XCTAssertEqual(result["approval"]?.string, "approved")
    }

    func testAToolThatReportsAnErrorIsAFailedResultTheModelSees() throws {
        let (asker, _, id) = try attachedPair()
        let reply = try send(asker, id, #"[[tool:open__fail {"reason":"the disk is on fire"}]]"#)
        let notes = try follow(asker, reply)
        let result = try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["status"]?.string, "failed")
        XCTAssertEqual(result["error"]?["code"]?.string, "tool_error")
        let content = try XCTUnwrap(result["content"]?.string)
        XCTAssertTrue(content.contains("the disk is on fire"), content)
        let toolTurn = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array?.last)
        XCTAssertTrue(toolTurn["content"]?.string?.contains("the disk is on fire") ?? false, "\(toolTurn)")
    }

    func testCancelEndsTheCallAndTellsTheServer() throws {
        let (asker, watcher, id) = try attachedPair()
        let reply = try send(asker, id, #"[[tool:open__slow {"seconds":300}]]"#)
        _ = try watcher.collect(until: { method, _ in method == "tool.started" }, timeout: 60)
        let cancelled = try asker.call("generation.cancel", ["conversation": .string(id), "message": .string(reply)])
        XCTAssertEqual(cancelled["cancelled"]?.string, reply)
        let notes = try follow(watcher, reply)
        XCTAssertEqual(notes.first { $0.method == "tool.completed" }?.params["message"]?["status"]?.string, "cancelled")
        XCTAssertEqual(marker("open/cancelled"), "cancelled", "the server was sent notifications/cancelled and stopped the call")
    }

    /// The servers are ended by the kernel (the parent-death signal): `open` in the middle of a
    /// call, and `stubborn`, which would not end when its input closes.
    func testKillingConfabdWithSIGKILLLeavesNoServerRunning() throws {
        try FileManager.default.createDirectory(atPath: markers + "/stubborn", withIntermediateDirectories: false)
        try harness.writeConfig(config(extra: """
            [mcp.stubborn]
            command = "\(Self.venv)/bin/python"
            args = ["\(Self.root)/scripts/mcp-test-server.py"]
            env = { CONFAB_MCP_MARKERS = "\(markers)/stubborn", CONFAB_MCP_STUBBORN = "1" }
            """, tools: ", \"stubborn.echo\""))
        try harness.restartDaemon()
        let (asker, _, id) = try attachedPair()
        let reply = try send(asker, id, #"[[tool:open__slow {"seconds":300}]]"#)
        _ = try asker.collect(until: { method, _ in method == "tool.started" }, timeout: 60)
        _ = reply
        let pids = try ["open", "stubborn"].map { try XCTUnwrap(marker("\($0)/pid").flatMap { Int32($0) }) }
        XCTAssertTrue(pids.allSatisfy(Self.isRunning))
        harness.killDaemon()
        let deadline = Date().addingTimeInterval(30)
        while pids.contains(where: Self.isRunning), Date() < deadline { usleep(20_000) }
        for pid in pids where Self.isRunning(pid) {
            kill(pid, SIGKILL)
            XCTFail("an MCP server (pid \(pid)) outlived confabd")
        }
    }

    /// A reload stops a server whose table changed and the next call starts the new one; a
    /// reload with a mistake in a table is refused, naming the key and its line.
    func testAReloadReplacesAChangedServerAndABadTableIsRefusedWithItsLine() throws {
        let (asker, _, id) = try attachedPair()
        let first = try send(asker, id, #"[[tool:open__fail {"reason":"one"}]]"#)
        _ = try follow(asker, first)
        let before = try XCTUnwrap(marker("open/pid").flatMap { Int32($0) })
        try FileManager.default.removeItem(atPath: markers + "/open/pid")

        try harness.writeConfig(config().replacingOccurrences(of: "/open\" }\napproval = \"never\"", with: "/open\" }\napproval = \"sometimes\""))
        harness.daemon?.signal(SIGHUP)
        XCTAssertTrue(waitForLog("config reload rejected"), harness.log())
        XCTAssertTrue(harness.log().contains("mcp.open.approval must be \"always\" or \"never\", not \"sometimes\""), harness.log())
        XCTAssertTrue(Self.isRunning(before), "a refused reload changes nothing")

        try harness.writeConfig(config().replacingOccurrences(of: "/open\" }", with: "/open\", CHANGED = \"1\" }"))
        harness.daemon?.signal(SIGHUP)
        XCTAssertTrue(waitForLog("mcp=open no longer configured as it runs: stopping it"), harness.log())
        let deadline = Date().addingTimeInterval(30)
        while Self.isRunning(before), Date() < deadline { usleep(20_000) }
        XCTAssertFalse(Self.isRunning(before), "the old server was stopped")
        let second = try send(asker, id, #"[[tool:open__fail {"reason":"two"}]]"#)
        let notes = try follow(asker, second)
        XCTAssertTrue(notes.first { $0.method == "tool.completed" }?.params["message"]?["content"]?.string?.contains("two") ?? false)
        let after = try XCTUnwrap(marker("open/pid").flatMap { Int32($0) })
        XCTAssertNotEqual(after, before)
    }

    /// A server whose `env` holds a credential and puts it in its result: the result, the
    /// model and the daemon's log see `[secret]`.
    func testACredentialInEnvEchoedByTheServerIsRedacted() throws {
        harness.tearDown()
        let token = "ghp_confabTest0123456789abcdef"
        harness = try Harness(config: config(extra: """
            [mcp.leaky]
            command = "\(Self.venv)/bin/python"
            args = ["\(Self.root)/scripts/mcp-test-server.py"]
            env = { CONFAB_MCP_ECHOED_VARIABLE = "GITHUB_PERSONAL_ACCESS_TOKEN", GITHUB_PERSONAL_ACCESS_TOKEN = "\(token)", CONFAB_MCP_HOSTILE_DESCRIPTION = "Uses \(token)." }
            approval = "never"

            """, tools: #", "leaky.variable", "leaky.odd""#))
        let (asker, _, id) = try attachedPair()
        let reply = try send(asker, id, #"[[tool:leaky__variable {}]]"#)
        let notes = try follow(asker, reply)
        let result = try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["content"]?.string, "GITHUB_PERSONAL_ACCESS_TOKEN=[secret]", "\(result)")
        let toolTurn = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array?.last)
        XCTAssertEqual(toolTurn["content"]?.string, "GITHUB_PERSONAL_ACCESS_TOKEN=[secret]")
        let offered = (modelRequests().first?["body"]?["tools"]?.array ?? []).compactMap { $0["function"] }
        XCTAssertEqual(offered.first { $0["name"]?.string == "leaky__odd" }?["description"]?.string, "Uses [secret].", "\(offered)")
        XCTAssertFalse(harness.log().contains(token), harness.log())
    }

    private func waitForLog(_ text: String, seconds: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if harness.log().contains(text) { return true }
            usleep(20_000)
        }
        return false
    }

    /// Alive and not a zombie (a container's first process may never reap it).
    static func isRunning(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(close, offsetBy: 2)...].first
        return state != "Z" && state != "X"
    }
}
