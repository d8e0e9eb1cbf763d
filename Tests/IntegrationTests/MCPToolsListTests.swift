import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What a description a server sends may hold: a title change, a colour, a direction override.
private let hostileDescription = "\u{1B}]2;PWNED\u{07}\u{1B}[31mred \u{202E}evil"

/// The servers of these tests: `mcp-server-time`, the SDK test server (its `odd` tool described
/// by `hostileDescription`), one that cannot start, and an HTTP tool beside them.
private func toolsConfig(extra: String = "") -> String {
    let venv = MCPIntegrationTests.venv, root = MCPIntegrationTests.root
    let escaped = hostileDescription.unicodeScalars.map { scalar in
        scalar.value < 0x20 || scalar.value > 0x7E ? String(format: "\\u%04X", scalar.value) : String(scalar)
    }.joined()
    return """
        \(extra)
        [tools.weather]
        description = "Weather at a place"
        parameters = { type = "object", properties = { city = { type = "string" } } }
        approval = "never"
        [tools.weather.request]
        method = "GET"
        url = "$UPSTREAM/tool/echo?x=1"

        [mcp.time]
        command = "\(venv)/bin/mcp-server-time"
        args = ["--local-timezone", "UTC"]
        approval = "never"

        [mcp.test]
        command = "\(venv)/bin/python"
        args = ["\(root)/scripts/mcp-test-server.py"]
        env = { CONFAB_MCP_HOSTILE_DESCRIPTION = "\(escaped)" }
        tools = ["echo", "slow", "odd"]
        approval = "never"

        [mcp.broken]
        command = "/bin/sh"
        args = ["-c", "echo cannot go on >&2; exit 3"]

        [profiles.helper]
        tools = ["weather", "time.get_current_time", "test"]
        """
}

private func requireMCPServers() throws {
    guard FileManager.default.isExecutableFile(atPath: MCPIntegrationTests.venv + "/bin/mcp-server-time") else {
        throw unavailable("no MCP servers installed in \(MCPIntegrationTests.venv): `make test` sets them up (make .build/venv-mcp/.installed)")
    }
}

/// `tools.list` and `mcp.restart` against real servers.
final class MCPToolsListTests: XCTestCase {
    var harness: Harness!
    var connections: [OtherUser.Connection] = []
    static let otherUID: UInt32 = 4321

    override func setUpWithError() throws {
        try requireMCPServers()
        harness = try Harness(config: toolsConfig(extra: "[access]\nallow_uids = [\(Self.otherUID)]\n"))
    }

    override func tearDown() {
        for connection in connections { connection.stop() }
        harness?.tearDown()
    }

    private func list(_ client: RPCClient, _ params: JSON = [:]) throws -> ToolsListResult {
        ToolsListResult(json: try client.call("tools.list", params, timeout: 90))
    }

    private func servers(_ listing: ToolsListResult) -> [String: ListedServer] {
        Dictionary(uniqueKeysWithValues: listing.servers.map { ($0.name, $0) })
    }

    /// Listing starts nothing: a stopped server shows what its config names; once started,
    /// what it lists, with its pid; a server that cannot start says why.
    func testToolsListBeforeAndAfterTheServersStart() throws {
        let client = try harness.client()
        let before = try list(client)
        XCTAssertEqual(Set(before.servers.map(\.name)), ["time", "test", "broken"])
        for server in before.servers {
            XCTAssertEqual(server.state, .stopped, "\(server)")
            XCTAssertNil(server.pid)
            XCTAssertEqual(server.transport, .stdio)
        }
        XCTAssertEqual(servers(before)["test"]?.tools, 3, "the filter's tools")
        XCTAssertEqual(servers(before)["time"]?.tools, 0, "nothing is known of a server with no filter until it runs")
        XCTAssertEqual(before.tools.map(\.name), ["weather", "test__echo", "test__slow", "test__odd"])
        XCTAssertEqual(before.tools.first, ListedTool(name: "weather", source: .http, description: "Weather at a place", approval: .never))
        XCTAssertEqual(before.tools.dropFirst().first, ListedTool(name: "test__echo", source: .mcp, server: "test", tool: "echo", description: "",
                                                   approval: .never, isListed: false))
        XCTAssertFalse(harness.log().contains("started pid="), "listing started a server:\n\(harness.log())")

        let after = try list(client, ["start": true])
        let byName = servers(after)
        let time = try XCTUnwrap(byName["time"])
        XCTAssertEqual(time.state, .ready)
        XCTAssertEqual(time.tools, 2)
        XCTAssertTrue(MCPIntegrationTests.isRunning(Int32(try XCTUnwrap(time.pid))))
        XCTAssertEqual(byName["test"]?.state, .ready)
        XCTAssertEqual(byName["test"]?.tools, 3)
        let broken = try XCTUnwrap(byName["broken"])
        XCTAssertEqual(broken.state, .failed)
        XCTAssertFalse((broken.error ?? "").isEmpty, "\(broken)")
        XCTAssertEqual(Set(after.tools.map(\.name)), ["weather", "time__get_current_time", "time__convert_time", "test__echo", "test__slow", "test__odd"])
        let clock = try XCTUnwrap(after.tools.first { $0.name == "time__get_current_time" })
        XCTAssertEqual(clock.server, "time")
        XCTAssertEqual(clock.tool, "get_current_time")
        XCTAssertEqual(clock.approval, .never)
        XCTAssertTrue(clock.isListed)
        XCTAssertFalse(clock.description.isEmpty)
        XCTAssertEqual(after.tools.first { $0.name == "test__echo" }?.description, "Says back the text it is given.")
        XCTAssertEqual(after.tools.first { $0.name == "test__odd" }?.description, hostileDescription, "sent as the server gave it")

        // What one profile offers: its tools, its servers.
        let helper = try list(client, ["profile": "helper"])
        XCTAssertEqual(helper.tools.map(\.name), ["weather", "time__get_current_time", "test__echo", "test__slow", "test__odd"])
        XCTAssertEqual(helper.servers.map(\.name).sorted(), ["test", "time"])
        XCTAssertEqual(servers(helper)["time"]?.tools, 1)
        let unknown = try client.request("tools.list", ["profile": "nobody"])
        XCTAssertEqual(unknown["error"]?["code"]?.int, RPCError.invalidParams, unknown.text)
        XCTAssertTrue(unknown["error"]?["message"]?.string?.contains("nobody") ?? false, unknown.text)
    }

    /// A restart ends the process (a call in flight fails) and answers once the new one is
    /// ready, or has failed; an unknown server is named in the error.
    func testMCPRestartGivesANewProcessAndEndsTheCallInFlight() throws {
        let client = try harness.client()
        let started = servers(try list(client, ["start": true]))
        let oldTime = Int32(try XCTUnwrap(started["time"]?.pid))
        let restarted = MCPRestartResult(json: try client.call("mcp.restart", ["server": "time"], timeout: 90)).server
        XCTAssertEqual(restarted?.state, .ready, "\(String(describing: restarted))")
        let newTime = Int32(try XCTUnwrap(restarted?.pid))
        XCTAssertNotEqual(newTime, oldTime)
        XCTAssertEqual(restarted?.tools, 2)
        let deadline = Date().addingTimeInterval(30)
        while MCPIntegrationTests.isRunning(oldTime), Date() < deadline { usleep(20_000) }
        XCTAssertFalse(MCPIntegrationTests.isRunning(oldTime), "the old process was ended")
        XCTAssertEqual(servers(try list(client))["time"]?.pid, Int(newTime))

        // A call in flight on the server restarted ends failed.
        let created = try client.call("conversation.create", ["title": "restart", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try client.call("message.send", ["conversation": .string(id), "content": #"[[tool:test__slow {"seconds":300}]]"#], timeout: 60)
        _ = try client.collect(until: { method, _ in method == "tool.started" }, timeout: 60)
        // Restarted from another connection, so this one's notifications wait in its socket.
        let other = try harness.client(name: "other")
        let test = MCPRestartResult(json: try other.call("mcp.restart", ["server": "test"], timeout: 90)).server
        XCTAssertEqual(test?.state, .ready)
        let notes = try client.collect(until: { method, _ in method == "tool.completed" }, timeout: 60)
        let ended = try XCTUnwrap(notes.last?.params["message"])
        XCTAssertEqual(ended["status"]?.string, "failed", ended.text)
        XCTAssertEqual(ended["error"]?["code"]?.string, ReplyErrorCode.toolConnection.rawValue, ended.text)
        XCTAssertTrue(ended["content"]?.string?.contains("restarted") ?? false, ended.text)

        let broken = MCPRestartResult(json: try client.call("mcp.restart", ["server": "broken"], timeout: 90)).server
        XCTAssertEqual(broken?.state, .failed)
        XCTAssertFalse((broken?.error ?? "").isEmpty)

        let unknown = try client.request("mcp.restart", ["server": "nope"])
        XCTAssertEqual(unknown["error"]?["code"]?.int, RPCError.invalidParams, unknown.text)
        XCTAssertTrue(unknown["error"]?["message"]?.string?.contains("\"nope\"") ?? false, unknown.text)
        let missing = try client.request("mcp.restart", [:])
        XCTAssertEqual(missing["error"]?["code"]?.int, RPCError.invalidParams, missing.text)
    }

    /// Another user may connect, and may neither list the owner's tools nor restart a server.
    func testAnotherUserMayNotListOrRestart() throws {
        try OtherUser.requireRoot()
        OtherUser.openSocket(harness)
        let connection = try OtherUser.Connection(uid: Self.otherUID, socketPath: harness.socketPath)
        connections.append(connection)
        _ = try connection.client.call("hello", ["client": "tools-test"])
        for (method, params) in [("tools.list", JSON.object([:])), ("mcp.restart", ["server": "time"])] {
            let frame = try connection.client.request(method, params)
            XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.notPermitted, "\(method): \(frame.text)")
            XCTAssertEqual(frame["error"]?["data"]?["needs"]?.string, "owner")
        }
        XCTAssertFalse(harness.log().contains("restart asked for"), harness.log())
    }
}

/// `confab tools` and `/tools` on a terminal: the servers' text shown escaped, never obeyed.
final class MCPToolsClientTests: TmuxTestCase {
    override func setUpWithError() throws {
        try requireMCPServers()
        harness = try Harness(config: toolsConfig())
        tmux = Tmux(directory: harness.directory)
    }

    private func assertEscaped(_ pane: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertNotEqual(try tmux.format(pane, "#{pane_title}"), "PWNED", "a description retitled the pane", file: file, line: line)
        let coloured = try tmux.screen(pane, escapes: true)
        XCTAssertFalse(coloured.contains("\u{1B}[31m"), "a description coloured the text:\n\(coloured.debugDescription)", file: file, line: line)
        XCTAssertTrue(try tmux.screen(pane).contains("^[]2;PWNED^G^[[31mred <U+202E>evil"), "the description is shown, visibly", file: file, line: line)
    }

    func testConfabToolsListsEachSourceAndShowsDescriptionsEscaped() throws {
        let pane = try tmux.start(harness.confabCommand(["tools", "--start"]), width: 160, height: 30)
        let screen = try tmux.waitForText(pane, "[exit 0]", timeout: 90)
        try assertEscaped(pane)
        XCTAssertTrue(screen.contains("HTTP tools"), screen)
        XCTAssertTrue(screen.contains("  weather"), screen)
        XCTAssertTrue(screen.contains("MCP server time (stdio): ready, pid "), screen)
        XCTAssertTrue(screen.contains(", 2 tools"), screen)
        XCTAssertTrue(screen.contains("  time__get_current_time"), screen)
        XCTAssertTrue(screen.contains("MCP server broken (stdio): failed: "), screen)

        let restart = try tmux.start(harness.confabCommand(["tools", "--restart", "broken"]), width: 160, height: 10)
        let failed = try tmux.waitForText(restart, "[exit 1]", timeout: 90)
        XCTAssertTrue(failed.contains("server broken (stdio): failed: "), failed)
    }

    func testSlashToolsInAttachShowsTheListingAndRestarts() throws {
        let client = try harness.client()
        let created = try client.call("conversation.create", ["title": "tools", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        _ = try client.call("tools.list", ["start": true], timeout: 90)
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 160, height: 40)
        try tmux.waitForText(pane, "here: ana (you)", timeout: 20)
        try tmux.type(pane, "/tools")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "MCP server test (stdio): ready", timeout: 20)
        try assertEscaped(pane)
        try tmux.type(pane, "/tools --restart time")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForScreen(pane, timeout: 90, "the restarted server's state") { $0.contains("-- MCP server time (stdio): ready, pid ") }
    }
}
