import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What a hostile MCP server over stdio (scripts/mcp-hostile-server.py, on Python's standard
/// library) must not be able to do to the real confabd: grow its memory with requests it
/// never reads the answers of, freeze its loop with a pattern, pass a tool off as asking
/// first when it does not, find the daemon's descriptors in its own, or write long log lines.
final class MCPHostileServerTests: XCTestCase {
    var harness: Harness!
    var markers = ""

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let script = root + "/scripts/mcp-hostile-server.py"

    override func setUpWithError() throws {
        var template = Array("/tmp/confab-hostile-XXXXXX".utf8CString)
        markers = String(cString: try XCTUnwrap(mkdtemp(&template)))
    }

    override func tearDown() {
        harness?.tearDown()
        if !markers.isEmpty { try? FileManager.default.removeItem(atPath: markers) }
    }

    /// A `[mcp.NAME]` table running the hostile server with `options`.
    private func server(_ name: String, _ options: [String] = [], _ extra: String = "") -> String {
        let arguments = ([Self.script] + options).map { JSON.string($0).text }.joined(separator: ", ")
        return """
            [mcp.\(name)]
            command = "/usr/bin/python3"
            args = [\(arguments)]
            env = { CONFAB_MCP_MARKERS = "\(markers)" }
            \(extra)

            """
    }

    private func profile(_ tools: [String]) -> String {
        "[profiles.helper]\ntools = [\(tools.map { "\"\($0)\"" }.joined(separator: ", "))]\n"
    }

    private func conversation(_ client: RPCClient, profile: String? = "helper") throws -> String {
        var params: [String: JSON] = ["title": "hostile"]
        if let profile { params["profile"] = .string(profile) }
        let created = try client.call(RPCMethod.conversationCreate.rawValue, .object(params))
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        return id
    }

    /// Sends `text` and follows its reply to its end, denying every approval asked for.
    private func ask(_ client: RPCClient, _ id: String, _ text: String) throws -> [(method: String, params: JSON)] {
        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": .string(text)], timeout: 60)
        let chain = MessageID.sequence(of: try XCTUnwrap(sent["reply"]?.string))
        var denied: [(method: String, params: JSON)] = []
        while true {
            let notes = try client.collect(until: { method, params in
                if method == RPCNotification.toolApprovalRequested.rawValue { return true }
                guard method == RPCNotification.messageCompleted.rawValue || method == RPCNotification.messageFailed.rawValue,
                      let message = params["message"], message["role"]?.string == Role.assistant.rawValue,
                      let id = message["id"]?.string, MessageID.sequence(of: id) == chain else { return false }
                return message["status"]?.string != MessageStatus.complete.rawValue || (message["tool_calls"]?.array ?? []).isEmpty
            }, timeout: 60)
            denied += notes
            guard let last = notes.last, last.method == RPCNotification.toolApprovalRequested.rawValue else { return denied }
            try client.call(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": last.params["call"] ?? .null, "allow": false])
        }
    }

    private func toolResults(_ notes: [(method: String, params: JSON)]) -> [JSON] {
        notes.filter { $0.method == RPCNotification.toolCompleted.rawValue }.compactMap { $0.params["message"] }
    }

    /// A field of /proc/PID/status, in kB.
    private func memory(_ field: String) throws -> Int {
        let pid = try XCTUnwrap(harness.daemon?.pid)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix(field + ":") })
        return try XCTUnwrap(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    private func listedServer(_ client: RPCClient, _ name: String) throws -> ListedServer? {
        ToolsListResult(json: try client.call(RPCMethod.toolsList.rawValue, [:], timeout: 60)).servers.first { $0.name == name }
    }

    /// Issue 31, finding 4: a server that wrote 2,000,000 pings and never read its input took
    /// confabd from 48 MB to 855 MB. The answers waiting for it are bounded: past the bound it
    /// has failed (said in the log and in `tools.list`), is restarted, floods again, and is
    /// given up on; the daemon's peak memory stays near where it was, and another client's
    /// `status` is answered all along.
    func testAServerThatFloodsPingsAndNeverReadsCannotGrowTheDaemon() throws {
        harness = try Harness(config: server("flood", ["--flood-pings", "400000"]) + profile(["flood"]))
        let before = try memory("VmHWM")
        let client = try harness.client(name: "asker")
        let other = try harness.client(name: "other")
        _ = try client.call(RPCMethod.toolsList.rawValue, ["start": true], timeout: 60)
        var seen: ListedServer?
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            XCTAssertNotNil(try other.call(RPCMethod.status.rawValue, [:], timeout: 30)["version"], "another client is answered during the flood")
            seen = try listedServer(client, "flood")
            if seen?.error?.hasPrefix("gave up") == true { break }
            usleep(50_000)
        }
        let reason = "the server does not read its input: more than 4 MiB or 1000 messages wait to be written to it"
        XCTAssertEqual(seen?.state, .failed)
        XCTAssertEqual(seen?.error, "gave up after 5 failures in a row: \(reason)")
        XCTAssertTrue(harness.log().contains("mcp=flood failed: \(reason)"), harness.log())
        let peak = try memory("VmHWM")
        XCTAssertLessThan(peak - before, 64 << 10, "confabd's peak memory grew from \(before) kB to \(peak) kB")
        XCTAssertFalse(FileManager.default.fileExists(atPath: markers + "/flooded"), "confabd stopped taking the flood")
    }

    /// Finding 5: `^(a+)+$` on 20 a's and a `!` kept `confab status` unanswered for 40 s with a
    /// backtracking matcher (each further character doubling it). Here 30 a's: the check says
    /// no at once, and status is answered. A pattern RE2 cannot run (a lookahead) is left to
    /// the server, while the rest of its schema (maxLength) is still checked.
    func testAServersBacktrackingPatternIsCheckedInLinearTimeAndALookaheadIsLeftToIt() throws {
        harness = try Harness(config: server("pat", [], "approval = \"never\"") + profile(["pat"]))
        let client = try harness.client(name: "asker")
        let id = try conversation(client)
        let payload = String(repeating: "a", count: 30) + "!"
        let notes = try ask(client, id, #"[[tool:pat__nested {"text":"\#(payload)"}]]"#)
        let refused = try XCTUnwrap(toolResults(notes).first)
        XCTAssertEqual(refused["error"]?["code"]?.string, ReplyErrorCode.toolArguments.rawValue, "\(refused)")
        XCTAssertEqual(refused["error"]?["message"]?.string, #""text" must match the pattern "^(a+)+$""#)
        let other = try harness.client(name: "other")
        XCTAssertNotNil(try other.call(RPCMethod.status.rawValue, [:], timeout: 30)["version"])
        let matched = try XCTUnwrap(toolResults(try ask(client, id, #"[[tool:pat__nested {"text":"aaaa"}]]"#)).first)
        XCTAssertEqual(matched["content"]?.string, "checked by the server: aaaa", "\(matched)")

        let leftToServer = try XCTUnwrap(toolResults(try ask(client, id, #"[[tool:pat__lookahead {"text":"abc"}]]"#)).first)
        XCTAssertEqual(leftToServer["content"]?.string, "checked by the server: abc", "\(leftToServer)")
        let tooLong = try XCTUnwrap(toolResults(try ask(client, id, #"[[tool:pat__lookahead {"text":"abcdefg"}]]"#)).first)
        XCTAssertEqual(tooLong["error"]?["message"]?.string, #""text" must be at most 5 characters long"#, "\(tooLong)")
    }

    /// Finding 6c: `tools.list` showed the server's `approval` and ignored `tool_approval` and
    /// `autoApprove` (`fs__delete_all` listed `always` ran without a question). Each tool is
    /// listed as a call of it behaves: asked about (`always`) or run at once (`never`).
    func testToolsListShowsTheApprovalEachCallHas() throws {
        let file = markers + "/mcp.json"
        try #"{"mcpServers": {"files": {"command": "/usr/bin/python3", "args": [\#(JSON.string(Self.script).text)], "autoApprove": ["delete_all"]}}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let config = server("fs", [], "approval = \"always\"\ntool_approval = { read = \"never\" }")
            + profile(["fs.read", "fs.delete_all", "files.read", "files.delete_all"])
        harness = try Harness(config: config, topLevel: "mcp_servers_file = \"\(file)\"")
        let client = try harness.client(name: "asker")
        let listing = ToolsListResult(json: try client.call(RPCMethod.toolsList.rawValue, ["profile": "helper", "start": true], timeout: 60))
        let listed = Dictionary(uniqueKeysWithValues: listing.tools.map { ($0.name, $0.approval) })
        XCTAssertEqual(listed, ["fs__read": .never, "fs__delete_all": .always, "files__read": .always, "files__delete_all": .never])
        let id = try conversation(client)
        for (name, approval) in listed.sorted(by: { $0.key < $1.key }) {
            let notes = try ask(client, id, "[[tool:\(name) {}]]")
            let asked = notes.contains { $0.method == RPCNotification.toolApprovalRequested.rawValue }
            XCTAssertEqual(asked ? ToolApprovalPolicy.always : .never, approval, "\(name): listed \(approval), and a call \(asked ? "asked" : "did not ask")")
            let result = try XCTUnwrap(toolResults(notes).first, name)
            XCTAssertEqual(result["approval"]?.string, asked ? "denied" : nil, "\(name): \(result)")
        }
        let printed = try harness.runClient(["tools", "--profile", "helper"])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        for (name, approval) in listed {
            let line = printed.stdout.split(separator: "\n").first { $0.contains(name) }
            XCTAssertTrue(line?.contains(approval.rawValue) == true, "confab tools: \(line ?? "no line for \(name)")")
        }
    }

    /// Finding 6f: servers inherited libcurl's socket pair and connections. A server started
    /// after an upstream transfer finds only its three standard streams open. Finding 6h: the
    /// `level` of its `notifications/message` reaches the log cut short and escaped.
    func testAServerStartedAfterATransferInheritsNoDescriptorsAndItsLogLevelIsBounded() throws {
        let level = String(repeating: "A", count: 5000) + "\u{1B}[2J"
        harness = try Harness(config: server("fd", ["--log-level", level], "approval = \"never\"") + profile(["fd"]))
        let client = try harness.client(name: "asker")
        let plain = try conversation(client, profile: nil)
        let first = try ask(client, plain, "hello")
        XCTAssertEqual(first.last?.params["message"]?["status"]?.string, "complete", "an upstream transfer was made first")
        let id = try conversation(client)
        let result = try XCTUnwrap(toolResults(try ask(client, id, "[[tool:fd__fds {}]]")).first)
        let content = try XCTUnwrap(result["content"]?.string)
        XCTAssertEqual(content.split(separator: "\n").first, "fds: 0 1 2", content)

        let lines = harness.log().split(separator: "\n").filter { $0.contains("mcp=fd log ") }
        XCTAssertEqual(lines.count, 1, "\(lines.map { $0.prefix(200) })")
        XCTAssertTrue(lines.first?.hasSuffix("mcp=fd log " + String(repeating: "A", count: 16) + "…: a message with a hostile level") == true,
                      "\(lines.map { $0.prefix(200) })")
        XCTAssertFalse(harness.log().contains("\u{1B}"), "no escape reaches the log")
    }
}
