import XCTest

import ConfabProtocol
import DaemonSettings

/// What `FailureTests`, `ResilienceTests` and `SearchTests` checked of the broker's answers to
/// bad frames, bad parameters and requests beyond its limits, in-process: the broker reads the
/// same bytes from a socket here as in confabd, and a daemon process adds nothing to its answers.
final class InProcessRequestLimitsTests: XCTestCase {
    private var broker: InProcessBroker!
    private var clients: [InProcessClient] = []

    override func tearDown() {
        for client in clients { client.close() }
        broker?.close()
    }

    private func start(_ configure: (inout Settings) -> Void = { _ in }) throws {
        broker = try InProcessBroker(configure: configure)
    }

    private func client(name: String? = "tester") throws -> InProcessClient {
        let client = try InProcessClient(broker, name: name)
        clients.append(client)
        return client
    }

    // MARK: From FailureTests

    func testMalformedFramesGetJSONRPCErrorsAndTheConnectionLives() throws {
        try start()
        let client = try client()
        func answer(_ line: String) throws -> JSON {
            try client.sendRaw(line + "\n")
            return try XCTUnwrap(try client.readFrame())
        }
        var frame = try answer("this is not json")
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.parseError)
        XCTAssertEqual(frame["id"], .null)
        frame = try answer("[1,2,3]")
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidRequest)
        frame = try answer(#"{"jsonrpc":"2.0","id":{"x":1},"method":"status"}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidRequest)
        frame = try answer(#"{"jsonrpc":"1.0","id":7,"method":"status"}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidRequest)
        XCTAssertEqual(frame["id"]?.int, 7)
        frame = try answer(#"{"jsonrpc":"2.0","id":8,"method":"no.such.method"}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.methodNotFound)
        frame = try answer(#"{"jsonrpc":"2.0","id":9,"method":"conversation.get","params":{"conversation":"../../etc/passwd"}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams)
        frame = try answer(#"{"jsonrpc":"2.0","id":10,"method":"conversation.get","params":{"conversation":42}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams)
        XCTAssertTrue(frame["error"]?["message"]?.string?.contains("conversation") == true)
        frame = try answer(#"{"jsonrpc":"2.0","id":11,"method":"conversation.get","params":{"conversation":"0123456789ab"}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.notFound)
        frame = try answer(#"{"jsonrpc":"2.0","id":13,"method":"conversation.list","params":{"limit":1e300}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams)
        try client.sendRaw(Array("{\"a\":\u{FF}}\n".utf8.dropLast(4)) + [0xFF, 0xFE, 0x7D, 0x0A])
        frame = try XCTUnwrap(try client.readFrame())
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.parseError)
        // A notification with an unknown method gets no answer; the next request still does.
        try client.sendRaw(#"{"jsonrpc":"2.0","method":"no.such.method"}"# + "\n\n")
        XCTAssertEqual(try client.call("status")["server"]?.string, "confabd")
        let id = try broker.createConversation(client)
        XCTAssertThrowsError(try client.call("message.send", ["conversation": .string(id), "content": "   "])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams, "\(error)")
        }
        XCTAssertThrowsError(try client.call("conversation.history", ["conversation": .string(id), "before": "m01"])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams, "\(error)")
        }
    }

    // MARK: From SearchTests

    func testBadQueriesAreRefusedByName() throws {
        try start()
        let client = try client()
        for (params, fragment) in [([:], "missing parameter \"query\""), (["query": "  "], "must not be empty"),
                                   (["query": "x", "limit": 0], "\"limit\""), (["query": 3], "must be a string"),
                                   (["query": "x", "conversation": "nope"], "not a conversation id"),
                                   (["query": .string(String(repeating: "a", count: 1001))], "at most 1000 bytes")] as [(JSON, String)] {
            let frame = try client.request("conversation.search", params)
            XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams, "\(params)")
            XCTAssertTrue(frame["error"]?["message"]?.string?.contains(fragment) == true, "\(frame)")
        }
        let unknown = try client.request("conversation.search", ["query": "x", "conversation": "abcdefghjkmn"])
        XCTAssertEqual(unknown["error"]?["code"]?.int, RPCError.notFound)
    }

    // MARK: From ResilienceTests

    /// One stream at a time, and a client attached to two conversations.
    private func oneStreamTwoConversations() throws -> (client: InProcessClient, first: String, second: String) {
        try start { $0.limits.maxStreams = 1 }
        let client = try client()
        let first = try broker.createConversation(client), second = try broker.createConversation(client)
        for id in [first, second] { try client.call("conversation.attach", ["conversation": .string(id)]) }
        return (client, first, second)
    }

    func testStreamsBeyondTheLimitWaitTheirTurn() throws {
        let (client, first, second) = try oneStreamTwoConversations()
        // The first reply is held in flight until the counts are read: no window to race.
        let a = try client.call("message.send", ["conversation": .string(first), "content": "first"])
        let b = try client.call("message.send", ["conversation": .string(second), "content": "second"])
        let status = try client.call("status")
        XCTAssertEqual(status["streams"]?.int, 1)
        XCTAssertEqual(status["queued"]?.int, 1)
        XCTAssertEqual(broker.upstream.streams.count, 1, "the second waits without asking the upstream")
        try broker.answerNext(after: 0, "first done")
        try broker.answerNext(after: 1, "waited")
        let notes = try client.collect(until: { method, params in
            method == "message.completed" && params["message"]?["id"]?.string == b["reply"]?.string && params["conversation"]?.string == second
        })
        let order = notes.filter { $0.method == "message.completed" }.compactMap { $0.params["conversation"]?.string }
        XCTAssertEqual(order, [first, second], "the second reply started only after the first ended")
        XCTAssertNotNil(a["reply"])
    }

    func testSendsBeyondTheQueueLimitAreRefusedEvenWhenPipelined() throws {
        try start { $0.limits.maxQueuedSends = 3 }
        let client = try client()
        let id = try broker.createConversation(client)
        // Ten sends in one write: each is being stored when the next is read, so the limit
        // must count those too. One reply in progress plus three waiting are accepted.
        var batch: [UInt8] = []
        for n in 0..<10 {
            batch += RPC.request(id: .int(1000 + n), method: "message.send",
                                 params: ["conversation": .string(id), "content": .string("send \(n)")])
        }
        try client.sendRaw(batch)
        var codes: [Int] = []
        for n in 0..<10 {
            let frame = try client.response(to: .int(1000 + n))
            codes.append(frame["error"]?["code"]?.int ?? 0)
        }
        XCTAssertEqual(codes, [0, 0, 0, 0] + Array(repeating: RPCError.limitReached, count: 6), "\(codes)")
        let status = try client.call("status")
        XCTAssertEqual(status["streams"]?.int, 1)
        XCTAssertEqual(status["queued"]?.int, 3)
        // The refused sends stored nothing: the conversation holds four user messages.
        let messages = try client.call("conversation.history", ["conversation": .string(id), "limit": 100])["messages"]?.array ?? []
        XCTAssertEqual(messages.filter { $0["role"]?.string == "user" }.count, 4)
        // Room again once a reply ends.
        try client.call("generation.cancel", ["conversation": .string(id)])
        // The cancelled reply ends once its record is durable; the next one then starts.
        var queued: Int?
        broker.turn(until: {
            queued = broker.broker.counts.queued
            return queued == 2
        })
        XCTAssertEqual(queued, 2)
        XCTAssertNotNil(try client.call("message.send", ["conversation": .string(id), "content": "fits"])["reply"])
        XCTAssertThrowsError(try client.call("message.send", ["conversation": .string(id), "content": "no room"])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.limitReached)
        }
    }

    func testHistoryIsCappedPerRequest() throws {
        try start()
        let client = try client()
        let id = try broker.createConversation(client)
        XCTAssertNotNil(try client.call("conversation.history", ["conversation": .string(id), "limit": 1000])["messages"])
        XCTAssertNotNil(try client.call("conversation.attach", ["conversation": .string(id), "history": 1000])["messages"])
        for (method, name) in [("conversation.history", "limit"), ("conversation.attach", "history")] {
            XCTAssertThrowsError(try client.call(method, ["conversation": .string(id), name: 1001])) { error in
                XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams, "\(method) \(name)")
                XCTAssertTrue((error as? RPCError)?.message.contains(name) == true, "\(error)")
            }
        }
    }

    /// The broker's own connection is the first of the three.
    func testTooManyClientsAreRefusedWithAReason() throws {
        try start { $0.limits.maxClients = 3 }
        let kept = try (1..<3).map { try client(name: "c\($0)") }
        let extra = try client(name: nil)
        let frame = try XCTUnwrap(try extra.readFrame())
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.limitReached)
        XCTAssertNil(try extra.readFrame())
        XCTAssertEqual(try kept[0].call("status")["clients"]?.int, 3)
    }

    /// The broker's own connection is the bystander.
    func testHostileFramesNeitherCrashNorStallOthers() throws {
        try start()
        let hostile = try client(name: "hostile")
        // Half a line, then silence: it holds only its own buffer.
        let staller = try client(name: nil)
        try staller.sendRaw(#"{"jsonrpc":"2.0","id":1,"me"#)
        // Deep nesting and huge numbers.
        try hostile.sendRaw(String(repeating: "[", count: 100_000) + "\n")
        XCTAssertEqual(try hostile.readFrame()?["error"]?["code"]?.int, RPCError.parseError)
        // Foundation's decoder traps, instead of throwing, on a 513th `[` that ends the input.
        try hostile.sendRaw(String(repeating: "[", count: 513) + "\n")
        XCTAssertEqual(try hostile.readFrame()?["error"]?["code"]?.int, RPCError.parseError)
        try hostile.sendRaw(#"{"jsonrpc":"2.0","id":2,"method":"conversation.list","params":{"limit":123456789012345678901234567890}}"# + "\n")
        XCTAssertEqual(try hostile.readFrame()?["error"]?["code"]?.int, RPCError.invalidParams)
        try hostile.sendRaw(#"{"jsonrpc":"2.0","id":3,"method":"conversation.attach","params":{"conversation":"abcdefghjkmn","history":-1}}"# + "\n")
        XCTAssertNotNil(try hostile.readFrame()?["error"])
        try hostile.sendRaw(#"{"jsonrpc":"2.0","id":4,"method":"message.send","params":["positional"]}"# + "\n")
        XCTAssertEqual(try hostile.readFrame()?["error"]?["code"]?.int, RPCError.invalidParams)
        try hostile.sendRaw("\u{0}\u{1}\u{2}\n")
        XCTAssertEqual(try hostile.readFrame()?["error"]?["code"]?.int, RPCError.parseError)
        // Ids that must never reach a path.
        for bad in ["../../etc/passwd", "/etc/passwd", "abc\u{0}defghijk", String(repeating: "a", count: 5000), "ABCDEFGHJKMN"] {
            XCTAssertThrowsError(try hostile.call("conversation.get", ["conversation": .string(bad)])) { error in
                XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams)
            }
        }
        XCTAssertEqual(try broker.call(.status)["clients"]?.int, 3)
    }
}
