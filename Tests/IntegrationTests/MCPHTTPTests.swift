import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// MCP servers over Streamable HTTP against the official Python SDK's server on loopback
/// (scripts/mcp-http-test-server.py, from the virtual environment `make test` sets up): one
/// answering with event streams (`web`, with a bearer token from a file and a key header from
/// the environment), one with JSON (`plain`). A call end to end, a tool's own error, secrets
/// kept out of the log and the results, the server going away mid-session and a new session
/// after it, and a tool list change arriving on the server's own stream.
final class MCPHTTPIntegrationTests: XCTestCase {
    var harness: Harness!
    var markers = ""
    var servers: [String: Child] = [:]
    var ports: [String: Int] = [:]
    static let token = "tok-7c1d9e55b0a2f1c8d3e4"
    static let apiKey = "key-41aa7f0b9e3c2d18"

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: MCPIntegrationTests.venv + "/bin/python"),
              FileManager.default.fileExists(atPath: MCPIntegrationTests.venv + "/.installed") else {
            throw unavailable("no MCP SDK installed in \(MCPIntegrationTests.venv): `make test` sets it up (make .build/venv-mcp/.installed)")
        }
        var template = Array("/tmp/confab-mcp-http-XXXXXX".utf8CString)
        markers = String(cString: try XCTUnwrap(mkdtemp(&template)))
        // Both launched before either is waited for: each spends most of its start importing the SDK.
        try launchServer("web")
        try launchServer("plain", json: true)
        try waitForServer("web")
        try waitForServer("plain")
        let tokenFile = markers + "/token"
        try Self.token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        setenv("CONFAB_TEST_MCP_KEY", Self.apiKey, 1)
        harness = try Harness(config: """
            [mcp.web]
            url = "http://127.0.0.1:\(ports["web"]!)/mcp"
            bearer_token_file = "\(tokenFile)"
            header_env = { X-Api-Key = "CONFAB_TEST_MCP_KEY" }
            approval = "never"

            [mcp.plain]
            url = "http://127.0.0.1:\(ports["plain"]!)/mcp"
            headers = { X-Client = "confab tests" }
            approval = "never"

            [profiles.helper]
            tools = ["web", "plain"]
            """)
    }

    override func tearDown() {
        harness?.tearDown()
        for server in servers.values { server.stop() }
        unsetenv("CONFAB_TEST_MCP_KEY")
        if !markers.isEmpty { try? FileManager.default.removeItem(atPath: markers) }
    }

    /// Starts the test server `name` (on `port`, or a free one) and waits, bounded, until it listens.
    private func startServer(_ name: String, json: Bool = false, stateless: Bool = false, port: Int = 0) throws {
        try launchServer(name, json: json, stateless: stateless, port: port)
        try waitForServer(name)
    }

    private func launchServer(_ name: String, json: Bool = false, stateless: Bool = false, port: Int = 0) throws {
        let directory = markers + "/" + name
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        servers[name] = try Child(MCPIntegrationTests.venv + "/bin/python",
                                  [MCPIntegrationTests.root + "/scripts/mcp-http-test-server.py", "--markers", directory, "--port", String(port)]
                                  + (json ? ["--json"] : []) + (stateless ? ["--stateless"] : []), logFile: markers + "/\(name).log")
    }

    private func waitForServer(_ name: String) throws {
        let directory = markers + "/" + name
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: directory + "/port", encoding: .utf8), let bound = Int(text) {
                ports[name] = bound
                return
            }
            if servers[name]?.process.isRunning == false { break }
            usleep(20_000)
        }
        throw HarnessError(description: "the MCP test server \(name) did not start: \((try? String(contentsOfFile: markers + "/\(name).log", encoding: .utf8)) ?? "")")
    }

    private func conversation() throws -> (RPCClient, String) {
        let client = try harness.client(name: "asker")
        let created = try client.call("conversation.create", ["title": "mcp over http", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return (client, id)
    }

    /// The tool result of a reply that calls one tool, once the reply has ended.
    private func callResult(_ client: RPCClient, _ id: String, _ directive: String) throws -> JSON {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(directive)], timeout: 60)
        let chain = MessageID.sequence(of: try XCTUnwrap(sent["reply"]?.string))
        let notes = try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let mid = message["id"]?.string, MessageID.sequence(of: mid) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: 90)
        return try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"], "\(notes.map(\.method))")
    }

    private func modelRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/completions") == true }
    }

    private func waitForLog(_ text: String, seconds: Double = 60) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if harness.log().contains(text) { return true }
            usleep(20_000)
        }
        return false
    }

    func testACallOverHTTPWithEventStreamAnswersReachesTheModel() throws {
        let (client, id) = try conversation()
        let result = try callResult(client, id, #"[[tool:web__echo {"text":"over the wire"}]]"#)
        XCTAssertEqual(result["status"]?.string, "complete", "\(result)")
        XCTAssertEqual(result["content"]?.string, "over the wire")
        let requests = modelRequests()
        let offered = Set((requests.first?["body"]?["tools"]?.array ?? []).compactMap { $0["function"]?["name"]?.string })
        XCTAssertTrue(offered.isSuperset(of: ["web__echo", "web__fail", "web__session", "plain__echo"]), "\(offered)")
        XCTAssertEqual(requests.last?["body"]?["messages"]?.array?.last?["content"]?.string, "over the wire")
    }

    /// A server that answers with JSON; the session id it gave and the negotiated protocol
    /// version go with every request after `initialize`.
    func testAServerAnsweringWithJSONSeesTheSessionAndProtocolVersion() throws {
        let (client, id) = try conversation()
        let echoed = try callResult(client, id, #"[[tool:plain__echo {"text":"as json"}]]"#)
        XCTAssertEqual(echoed["content"]?.string, "as json", "\(echoed)")
        let session = try XCTUnwrap(try callResult(client, id, "[[tool:plain__session {}]]")["content"]?.string)
        XCTAssertTrue(session.hasPrefix("session "), session)
        XCTAssertFalse(session.contains("session (none)"), session)
        XCTAssertTrue(session.hasSuffix(" version 2025-11-25"), session)
    }

    /// A server without sessions (no `Mcp-Session-Id`): every request goes without one, and calls work.
    func testAServerWithoutSessionsIsCalledWithoutOne() throws {
        try startServer("bare", json: true, stateless: true)
        try harness.writeConfig("""
            [mcp.bare]
            url = "http://127.0.0.1:\(ports["bare"]!)/mcp"
            approval = "never"

            [profiles.helper]
            tools = ["bare"]
            """)
        try harness.restartDaemon()
        let (client, id) = try conversation()
        let session = try callResult(client, id, "[[tool:bare__session {}]]")
        XCTAssertEqual(session["content"]?.string, "session (none) version 2025-11-25", "\(session)")
        XCTAssertEqual(try callResult(client, id, #"[[tool:bare__echo {"text":"no session"}]]"#)["content"]?.string, "no session")
    }

    func testAToolThatReportsAnErrorOverHTTPIsAFailedResultTheModelSees() throws {
        let (client, id) = try conversation()
        let result = try callResult(client, id, #"[[tool:web__fail {"reason":"the bucket is empty"}]]"#)
        XCTAssertEqual(result["status"]?.string, "failed")
        XCTAssertEqual(result["error"]?["code"]?.string, "tool_error")
        XCTAssertTrue(result["content"]?.string?.contains("the bucket is empty") ?? false, "\(result)")
        XCTAssertTrue(modelRequests().last?["body"]?["messages"]?.array?.last?["content"]?.string?.contains("the bucket is empty") ?? false)
    }

    /// The server says back the Authorization header it was sent: the token reached it, and
    /// neither the result, the model, the daemon's log nor the stored conversation holds it.
    func testHeaderSecretsReachTheServerButNeverTheLogOrAResult() throws {
        let (client, id) = try conversation()
        let result = try callResult(client, id, "[[tool:web__authorization {}]]")
        let content = try XCTUnwrap(result["content"]?.string)
        XCTAssertTrue(content.hasPrefix("Authorization: ") && content.contains("[secret]"), "the server was sent the token: \(content)")
        let stored = try FileManager.default.subpathsOfDirectory(atPath: harness.dataDirectory).compactMap {
            try? String(contentsOfFile: harness.dataDirectory + "/" + $0, encoding: .utf8)
        }.joined()
        for secret in [Self.token, Self.apiKey] {
            XCTAssertFalse(harness.log().contains(secret), "the daemon's log holds a secret")
            XCTAssertFalse(stored.contains(secret), "the stored conversation holds a secret")
            XCTAssertFalse(harness.upstreamRequests().map(\.text).joined().contains(secret), "the model was given a secret")
        }
    }

    /// The server ends mid-call: the call fails with `tool_connection`; once it is back, the
    /// next call starts a new session.
    func testAServerGoingAwayMidSessionFailsTheCallAndTheNextCallStartsANewSession() throws {
        let (client, id) = try conversation()
        let first = try XCTUnwrap(try callResult(client, id, "[[tool:web__session {}]]")["content"]?.string)
        let vanished = try callResult(client, id, "[[tool:web__vanish {}]]")
        XCTAssertEqual(vanished["status"]?.string, "failed", "\(vanished)")
        XCTAssertEqual(vanished["error"]?["code"]?.string, "tool_connection", "\(vanished)")
        servers["web"]?.wait(seconds: 30)
        try startServer("web", port: ports["web"]!)
        // confabd starts it again after its back-off (0.5 s, longer on a loaded machine): a
        // call before then finds no such tool, which is right; wait, bounded, until it is ready.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let listing = ToolsListResult(json: try client.call("tools.list", ["start": true], timeout: 90))
            if listing.servers.contains(where: { $0.name == "web" && $0.state == .ready }) { break }
            usleep(100_000)
        }
        let second = try callResult(client, id, "[[tool:web__session {}]]")
        XCTAssertEqual(second["status"]?.string, "complete", "\(second)")
        let secondSession = try XCTUnwrap(second["content"]?.string)
        XCTAssertTrue(secondSession.hasPrefix("session ") && !secondSession.contains("(none)"), secondSession)
        XCTAssertNotEqual(secondSession, first, "a new session")
    }

    /// confabd's shutdown ends the session it holds with a DELETE naming it, and does not wait long.
    func testShutdownEndsTheSessionWithADelete() throws {
        let (client, id) = try conversation()
        let session = try XCTUnwrap(try callResult(client, id, "[[tool:web__session {}]]")["content"]?.string)
        let sessionID = try XCTUnwrap(session.split(separator: " ").dropFirst().first.map(String.init))
        XCTAssertNotNil(harness.stopDaemon(), "confabd stopped by itself")
        XCTAssertEqual(try? String(contentsOfFile: markers + "/web/deleted", encoding: .utf8), sessionID)
    }

    /// `mcp.restart` ends the session it replaces with a DELETE naming it, and starts a new one.
    func testARestartEndsTheOldSessionWithADelete() throws {
        let (client, id) = try conversation()
        let session = try XCTUnwrap(try callResult(client, id, "[[tool:web__session {}]]")["content"]?.string)
        let sessionID = try XCTUnwrap(session.split(separator: " ").dropFirst().first.map(String.init))
        _ = try client.call("mcp.restart", ["server": "web"], timeout: 90)
        let deadline = Date().addingTimeInterval(30)
        var deleted: String?
        while deleted != sessionID, Date() < deadline {
            deleted = try? String(contentsOfFile: markers + "/web/deleted", encoding: .utf8)
            usleep(20_000)
        }
        XCTAssertEqual(deleted, sessionID, harness.log())
        let after = try XCTUnwrap(try callResult(client, id, "[[tool:web__session {}]]")["content"]?.string)
        XCTAssertNotEqual(after, session, "a new session")
    }

    /// `notifications/tools/list_changed` comes on the server's own stream (the GET): the tool
    /// list is fetched again and the next reply offers the new tool.
    func testAToolListChangeOnTheServersOwnStreamOffersTheNewTool() throws {
        let (client, id) = try conversation()
        let grew = try callResult(client, id, "[[tool:web__grow {}]]")
        XCTAssertEqual(grew["content"]?.string, "grew", "\(grew)")
        XCTAssertTrue(waitForLog("mcp=web tool list changed"), harness.log())
        let grown = try callResult(client, id, "[[tool:web__grown {}]]")
        XCTAssertEqual(grown["status"]?.string, "complete", "\(grown)")
        XCTAssertEqual(grown["content"]?.string, "grown")
    }
}
