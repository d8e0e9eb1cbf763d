import ConfabProtocol
import MCP
import XCTest

/// `MCPSession` driven by scripted server lines: what it sends, and what it makes of answers.
final class MCPSessionTests: XCTestCase {
    private var sent: [JSON] = []
    private var session: MCPSession!

    override func setUp() {
        sent = []
        session = MCPSession(clientName: "confabd", clientVersion: "1") { [unowned self] line in
            XCTAssertEqual(line.last, 0x0A, "every message is one line")
            sent.append(try! JSON.parse(line.dropLast()))
        }
    }

    private func serve(_ text: String) { session.receive(Array(text.utf8)) }

    private func initialized(tools: String = #"[{"name":"get_time","description":"Now","inputSchema":{"type":"object"}}]"#) {
        session.start()
        serve(#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"t","version":"0"}}}"#)
        serve(#"{"jsonrpc":"2.0","id":2,"result":{"tools":\#(tools)}}"#)
        XCTAssertEqual(session.state, .ready)
        sent = []
    }

    func testTheHandshakeAsksForTheNewestVersionThenSaysInitializedThenListsTools() {
        var ready = false
        session.onReady = { ready = true }
        session.start()
        XCTAssertEqual(sent.count, 1)
        XCTAssertEqual(sent[0]["method"], "initialize")
        XCTAssertEqual(sent[0]["id"], 1)
        XCTAssertEqual(sent[0]["params"]?["protocolVersion"]?.string, MCPSession.supportedVersions[0])
        XCTAssertEqual(sent[0]["params"]?["clientInfo"]?["name"], "confabd")
        XCTAssertNotNil(sent[0]["params"]?["capabilities"]?.object)
        XCTAssertEqual(session.state, .initializing)

        // The server answers with an older revision it prefers: accepted, as it is one we speak.
        serve(#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"time","version":"1"}}}"#)
        XCTAssertEqual(session.protocolVersion, "2025-03-26")
        XCTAssertEqual(session.serverName, "time")
        XCTAssertEqual(sent.count, 3)
        XCTAssertEqual(sent[1]["method"], "notifications/initialized")
        XCTAssertNil(sent[1]["id"], "a notification has no id")
        XCTAssertEqual(sent[2]["method"], "tools/list")
        XCTAssertNil(sent[2]["params"]?["cursor"])
        XCTAssertFalse(ready)

        // Two pages.
        serve(#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}],"nextCursor":"page2"}}"#)
        XCTAssertEqual(sent.count, 4)
        XCTAssertEqual(sent[3]["params"]?["cursor"], "page2")
        XCTAssertFalse(ready)
        serve(#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"b","description":"Bee"}]}}"#)
        XCTAssertTrue(ready)
        XCTAssertEqual(session.state, .ready)
        XCTAssertEqual(session.tools.map(\.name), ["a", "b"])
        XCTAssertEqual(session.tools[1].description, "Bee")
        XCTAssertEqual(session.tools[1].inputSchema, ["type": "object"], "a missing schema is an empty object schema")
    }

    func testAVersionWeDoNotSpeakFailsTheSession() {
        var failure: String?
        session.onFailed = { failure = $0 }
        session.start()
        serve(#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01","capabilities":{}}}"#)
        XCTAssertTrue(session.isFailed)
        XCTAssertTrue(failure?.contains("1999-01-01") ?? false, failure ?? "")
        XCTAssertEqual(sent.count, 1, "no initialized notification after a failed negotiation")
    }

    func testAnInitializeErrorOrAGarbageLineFailsTheSession() {
        session.start()
        serve(#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"nope"}}"#)
        XCTAssertEqual(session.state, .failed("the server refused initialize: nope"))

        setUp()
        session.start()
        serve("Starting server on stdio...")
        XCTAssertTrue(session.isFailed)
    }

    func testAServerWithoutToolsIsReadyWithNone() {
        session.start()
        serve(#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#)
        XCTAssertEqual(session.state, .ready)
        XCTAssertEqual(session.tools, [])
        XCTAssertEqual(sent.last?["method"], "notifications/initialized")
    }

    func testACallSendsToolsCallAndItsAnswerEndsIt() {
        initialized()
        var outcome: MCPCallOutcome?
        let id = session.call(tool: "get_time", arguments: ["timezone": "UTC"]) { outcome = $0 }
        XCTAssertEqual(id, 3)
        XCTAssertEqual(sent.last?["method"], "tools/call")
        XCTAssertEqual(sent.last?["params"]?["name"], "get_time")
        XCTAssertEqual(sent.last?["params"]?["arguments"]?["timezone"], "UTC")
        // Another id's answer, and a notification, change nothing.
        serve(#"{"jsonrpc":"2.0","id":99,"result":{}}"#)
        serve(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#)
        XCTAssertNil(outcome)
        serve(#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"12:00"}]}}"#)
        XCTAssertEqual(outcome, .answered(MCPToolResult(text: "12:00", isError: false)))
        XCTAssertEqual(session.pendingCount, 0)
    }

    func testAnErrorResponseFailsTheCallButNotTheSession() {
        initialized()
        var outcome: MCPCallOutcome?
        session.call(tool: "nope", arguments: [:]) { outcome = $0 }
        serve(#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: nope"}}"#)
        XCTAssertEqual(outcome, .refused("the server answered with an error: Unknown tool: nope (-32602)"))
        XCTAssertEqual(session.state, .ready)
    }

    func testCancelTellsTheServerEndsTheCallAndIgnoresALateAnswer() {
        initialized()
        var outcomes: [MCPCallOutcome] = []
        let id = session.call(tool: "slow", arguments: [:]) { outcomes.append($0) }!
        session.cancel(id, reason: "cancelled by the user")
        XCTAssertEqual(sent.last?["method"], "notifications/cancelled")
        XCTAssertEqual(sent.last?["params"]?["requestId"], .int(id))
        XCTAssertEqual(sent.last?["params"]?["reason"], "cancelled by the user")
        XCTAssertEqual(outcomes, [.failed("cancelled by the user")])
        serve(#"{"jsonrpc":"2.0","id":\#(id),"result":{"content":[]}}"#)
        XCTAssertEqual(outcomes.count, 1, "the late answer is ignored")
    }

    func testFailEndsEveryPendingCall() {
        initialized()
        var outcomes: [MCPCallOutcome] = []
        session.call(tool: "a", arguments: [:]) { outcomes.append($0) }
        session.call(tool: "b", arguments: [:]) { outcomes.append($0) }
        session.fail("the server exited")
        XCTAssertEqual(outcomes, [.failed("the server exited"), .failed("the server exited")])
        session.call(tool: "c", arguments: [:]) { outcomes.append($0) }
        XCTAssertEqual(outcomes.last, .failed("the server exited"))
    }

    func testListChangedListsAgainAndReplacesTheTools() {
        initialized()
        var changed = 0
        session.onToolsChanged = { changed += 1 }
        serve(#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
        XCTAssertEqual(sent.last?["method"], "tools/list")
        XCTAssertEqual(session.tools.map(\.name), ["get_time"], "the old list holds until the new one is in")
        serve(#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"x"},{"name":"y"}]}}"#)
        XCTAssertEqual(session.tools.map(\.name), ["x", "y"])
        XCTAssertEqual(changed, 1)
    }

    func testPingIsAnsweredAndOtherServerRequestsAreRefused() {
        initialized()
        serve(#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#)
        XCTAssertEqual(sent.last?["id"], "p1")
        XCTAssertEqual(sent.last?["result"], .object([:]))
        serve(#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}"#)
        XCTAssertEqual(sent.last?["id"], 7)
        XCTAssertEqual(sent.last?["error"]?["code"], .int(RPCError.methodNotFound))
    }

    func testAnEndlessToolListIsBounded() {
        session.start()
        serve(#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}}"#)
        var id = 2
        while !session.isFailed, id < 1000 {
            serve(#"{"jsonrpc":"2.0","id":\#(id),"result":{"tools":[],"nextCursor":"again"}}"#)
            id += 1
        }
        XCTAssertTrue(session.isFailed)
        XCTAssertLessThanOrEqual(id, MCPSession.maxListPages + 2)
    }

    /// A call with a progress handler carries its id as the progress token; progress for it
    /// reaches the handler, progress for another token or after the answer does not.
    func testProgressOfACallInFlightReachesItsHandlerOnly() throws {
        initialized()
        var reports: [MCPProgress] = []
        var outcome: MCPCallOutcome?
        let id = try XCTUnwrap(session.call(tool: "get_time", arguments: [:], progress: { reports.append($0) }) { outcome = $0 })
        XCTAssertEqual(sent.last?["params"]?["_meta"]?["progressToken"]?.int, id)
        serve(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":\#(id),"progress":1,"total":4,"message":"one"}}"#)
        serve(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":\#(id),"progress":2.5}}"#)
        serve(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":999,"progress":3}}"#)
        serve(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":\#(id),"progress":"many"}}"#)
        serve(#"{"jsonrpc":"2.0","id":\#(id),"result":{"content":[{"type":"text","text":"now"}]}}"#)
        serve(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":\#(id),"progress":4}}"#)
        XCTAssertEqual(reports, [MCPProgress(progress: 1, total: 4, message: "one"), MCPProgress(progress: 2.5)])
        XCTAssertNotNil(outcome)
        // A call without a handler asks for no progress.
        session.call(tool: "get_time", arguments: [:]) { _ in }
        XCTAssertNil(sent.last?["params"]?["_meta"])
    }
    /// A long description is cut with a mark; too large a listing fails the server.
    func testToolDescriptionsAreCutAndTheListingIsBounded() throws {
        let long = String(repeating: "é", count: MCPTool.maxDescriptionBytes)
        initialized(tools: #"[{"name":"long","description":"\#(long)"},{"name":"short","description":"Short"}]"#)
        let kept = session.tools[0].description
        XCTAssertTrue(kept.hasSuffix(MCPTool.cutMark), String(kept.suffix(20)))
        XCTAssertLessThanOrEqual(kept.utf8.count, MCPTool.maxDescriptionBytes)
        XCTAssertGreaterThan(kept.utf8.count, MCPTool.maxDescriptionBytes - 16)
        XCTAssertEqual(session.tools[1].description, "Short")

        // 600 tools of 8 KiB each: past the 4 MiB bound, on a refresh too.
        var failure: String?
        session.onFailed = { failure = $0 }
        serve(#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
        let id = try XCTUnwrap(sent.last?["id"]?.int)
        let description = String(repeating: "d", count: MCPTool.maxDescriptionBytes - 100)
        let many = (0..<600).map { #"{"name":"t\#($0)","description":"\#(description)"}"# }.joined(separator: ",")
        serve(#"{"jsonrpc":"2.0","id":\#(id),"result":{"tools":[\#(many)]}}"#)
        XCTAssertTrue(session.isFailed)
        XCTAssertEqual(failure, "the server's tool list holds more than 4 MiB of names, descriptions and schemas")
    }
}

final class MCPToolResultTests: XCTestCase {
    private func result(_ text: String) -> MCPToolResult { MCPToolResult(try! JSON.parse(text)) }

    func testTextPartsAreJoinedAndIsErrorIsKept() {
        XCTAssertEqual(result(#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#), MCPToolResult(text: "a\nb", isError: false))
        XCTAssertEqual(result(#"{"content":[{"type":"text","text":"bad input"}],"isError":true}"#), MCPToolResult(text: "bad input", isError: true))
    }

    func testStructuredContentIsGivenAsJSONUnlessATextPartCarriesIt() {
        XCTAssertEqual(result(#"{"content":[],"structuredContent":{"t":1}}"#).text, #"{"t":1}"#)
        XCTAssertEqual(result(#"{"content":[{"type":"text","text":"{\"t\": 1}"}],"structuredContent":{"t":1}}"#).text, #"{"t": 1}"#)
        XCTAssertEqual(result(#"{"content":[{"type":"text","text":"12:00"}],"structuredContent":{"result":"12:00"}}"#).text, "12:00")
    }

    func testImagesAndResourcesAreDescribed() {
        let text = result(#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"resource_link","uri":"file:///x","name":"x"},{"type":"resource","resource":{"uri":"file:///y","text":"why"}}]}"#).text
        XCTAssertEqual(text, "[image (image/png, about 3 bytes) not shown]\n[resource link: x <file:///x>]\n[resource file:///y]\nwhy")
    }
}

final class MCPToolNamesTests: XCTestCase {
    func testNamesAreReducedUniqueBoundedAndMapBack() {
        let targets = [
            MCPToolNames.Target(server: "time", tool: "get_current_time"),
            MCPToolNames.Target(server: "my.server", tool: "do it!"),
            MCPToolNames.Target(server: "my_server", tool: "do_it_"),
            MCPToolNames.Target(server: "s", tool: String(repeating: "x", count: 100)),
            MCPToolNames.Target(server: "s", tool: String(repeating: "x", count: 101)),
        ]
        let names = MCPToolNames(targets, taken: ["time__get_current_time"])
        XCTAssertEqual(names.byModelName.count, targets.count)
        for target in targets {
            let name = names.byTarget[target]!
            XCTAssertNotNil(name.wholeMatch(of: /[A-Za-z0-9_-]{1,64}/), name)
            XCTAssertEqual(names.byModelName[name], target)
        }
        XCTAssertEqual(names.byTarget[targets[0]], "time__get_current_time_2", "an HTTP tool's name is never taken")
        XCTAssertEqual(names.byTarget[targets[1]], "my_server__do_it_")
        XCTAssertEqual(names.byTarget[targets[2]], "my_server__do_it__2")
    }
}

final class StderrLinesTests: XCTestCase {
    func testLinesAreEscapedCutAndRateLimited() {
        var lines = StderrLines(maxLineCharacters: 10, linesPerWindow: 2, windowMilliseconds: 1000)
        XCTAssertEqual(lines.feed(Array("a\u{1B}[2Jb\\\nhalf".utf8), now: 0), ["a\\u{1b}[2Jb\\\\"])
        XCTAssertEqual(lines.feed(Array(" line\n0123456789abc\nthird\nfourth\n".utf8), now: 10), ["half line"])
        XCTAssertEqual(lines.feed(Array("later\n".utf8), now: 2000), ["(3 more lines dropped)", "later"])
        XCTAssertEqual(lines.feed(Array("tail".utf8), now: 2001), [])
        XCTAssertEqual(lines.finish(now: 2002), ["tail"])
    }
}
