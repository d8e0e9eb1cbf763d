import ConfabProtocol
import MCP
import XCTest

/// The pure parts of the Streamable HTTP transport: what an answer is from its status and type,
/// the session id taken from it, and the messages its JSON body or its events hold.
final class MCPHTTPExchangeTests: XCTestCase {
    func testAnswersAreClassifiedByStatusAndType() {
        func classify(_ status: Int, _ type: String?, session: Bool = true) -> MCPHTTPAnswer {
            MCPHTTPAnswer.classify(status: status, contentType: type, sentSessionID: session)
        }
        XCTAssertEqual(classify(200, "application/json"), .json)
        XCTAssertEqual(classify(200, "Application/JSON; charset=utf-8"), .json)
        XCTAssertEqual(classify(200, "text/event-stream"), .eventStream)
        XCTAssertEqual(classify(200, " text/event-stream ;charset=UTF-8"), .eventStream)
        XCTAssertEqual(classify(202, nil), .accepted)
        XCTAssertEqual(classify(202, "application/json"), .accepted, "a 202 carries no message whatever type it names")
        XCTAssertEqual(classify(200, nil), .accepted)
        XCTAssertEqual(classify(200, "text/html"), .unreadable(mediaType: "text/html"))
        XCTAssertEqual(classify(404, "text/plain"), .sessionExpired, "a 404 to a request with a session id: the session is gone")
        XCTAssertEqual(classify(404, "text/plain", session: false), .refused(status: 404), "without one it is a wrong URL")
        XCTAssertEqual(classify(405, nil), .methodNotAllowed)
        XCTAssertEqual(classify(401, "application/json"), .refused(status: 401))
        XCTAssertEqual(classify(500, "text/event-stream"), .refused(status: 500))
    }

    func testTheSessionIDIsTakenOnlyAsVisibleASCII() {
        XCTAssertEqual(try MCPHTTPExchange.sessionID(fromHeader: "1868a90c-4d1e").get(), "1868a90c-4d1e")
        XCTAssertEqual(try MCPHTTPExchange.sessionID(fromHeader: nil).get(), nil, "a server without sessions")
        for bad in ["", "a b", "a\r\nX-Injected: 1", "caf\u{e9}", "tab\there", String(repeating: "a", count: 1025)] {
            XCTAssertThrowsError(try MCPHTTPExchange.sessionID(fromHeader: bad).get(), bad.debugDescription)
        }
    }

    func testAJSONAnswerHoldsOneMessageOrAnArrayOfThem() throws {
        let one = try MCPHTTPExchange.messages(inJSONBody: Array(#"{"jsonrpc":"2.0","id":1,"result":{}}"#.utf8)).get()
        XCTAssertEqual(one.count, 1)
        XCTAssertEqual(try RPC.parse(one[0]).get(), .response(id: 1, result: [:]))
        let batch = try MCPHTTPExchange.messages(inJSONBody: Array(#"[{"jsonrpc":"2.0","method":"notifications/message","params":{}},{"jsonrpc":"2.0","id":2,"result":{}}]"#.utf8)).get()
        XCTAssertEqual(batch.count, 2)
        XCTAssertEqual(try RPC.parse(batch[1]).get(), .response(id: 2, result: [:]))
        XCTAssertThrowsError(try MCPHTTPExchange.messages(inJSONBody: Array("not json".utf8)).get())
        XCTAssertThrowsError(try MCPHTTPExchange.messages(inJSONBody: Array("42".utf8)).get())
    }

    /// Notifications and requests first, then the response, however the bytes are split; an
    /// event without data (a reconnection's priming event) and one of another type carry none.
    func testAnEventStreamAnswerBecomesItsMessagesInOrder() throws {
        let text = "id: p1\ndata:\n\n" + "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"
            + ": a comment\nevent: other\ndata: ignored\n\n" + "id: e2\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":7,\"result\":{}}\r\n\r\n"
        let bytes = Array(text.utf8)
        for split in [1, 3, 17, bytes.count] {
            var stream = MCPHTTPEventStream()
            var messages: [[UInt8]] = []
            var start = 0
            while start < bytes.count {
                messages += try stream.feed(Array(bytes[start..<min(start + split, bytes.count)]))
                start += split
            }
            XCTAssertEqual(messages.count, 2, "split \(split)")
            XCTAssertEqual(try RPC.parse(messages[0]).get(), .notification(method: "notifications/progress", params: [:]))
            XCTAssertEqual(try RPC.parse(messages[1]).get(), .response(id: 7, result: [:]), "data lines joined with a line feed")
            XCTAssertEqual(stream.lastEventID, "e2")
        }
    }

    func testAnEventThatNeverEndsIsBounded() throws {
        var stream = MCPHTTPEventStream(maxMessageBytes: 1000)
        XCTAssertEqual(try stream.feed(Array("data: {}\n\n".utf8)).count, 1)
        var failure: MCPHTTPEventStream.Failure?
        for _ in 0..<200 {
            do throws(MCPHTTPEventStream.Failure) {
                _ = try stream.feed(Array("data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".utf8))
            } catch {
                failure = error
                break
            }
        }
        XCTAssertEqual(failure, .tooLarge(limit: 1000), "data lines without the blank line that ends the event are not held without bound")
        var longLine = MCPHTTPEventStream(maxMessageBytes: 1000)
        XCTAssertThrowsError(try longLine.feed(Array(("data: " + String(repeating: "y", count: 2000)).utf8)))
    }

    /// A refusal says the status and what the server said, as one line of plain text.
    func testARefusalIsOneShortLineOfTheServersWords() {
        XCTAssertEqual(MCPHTTPExchange.refusal(status: 401, body: Array(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"bad token"}}"#.utf8)),
                       "HTTP 401: bad token")
        XCTAssertEqual(MCPHTTPExchange.refusal(status: 500, body: Array("Internal\r\n\u{1b}[31mServer Error".utf8)), "HTTP 500: Internal [31mServer Error")
        XCTAssertEqual(MCPHTTPExchange.refusal(status: 400, body: []), "HTTP 400")
        XCTAssertEqual(MCPHTTPExchange.refusal(status: 502, body: Array(String(repeating: "z", count: 5000).utf8)).count, "HTTP 502: ".count + 201)
    }

    /// The daemon's own messages go before answers to the server's requests, each kind in
    /// order; the outbox holds at most so many messages and bytes.
    func testTheOutboxSendsTheDaemonsOwnMessagesFirstAndIsBounded() {
        func line(_ text: String) -> [UInt8] { Array((text + "\n").utf8) }
        var outbox = MCPHTTPOutbox()
        let pong1 = line(#"{"jsonrpc":"2.0","id":"s1","result":{}}"#)
        let pong2 = line(#"{"jsonrpc":"2.0","id":"s2","error":{"code":-32601,"message":"no"}}"#)
        let cancelled = line(#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#)
        let call = line(#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#)
        for message in [pong1, pong2, cancelled, call] { XCTAssertTrue(outbox.append(message)) }
        XCTAssertEqual(outbox.count, 4)
        var sent: [[UInt8]] = []
        while let next = outbox.next() { sent.append(next) }
        XCTAssertEqual(sent, [cancelled, call, pong1, pong2])
        XCTAssertTrue(outbox.isEmpty)
        XCTAssertEqual(outbox.bytes, 0)

        var full = 0
        while outbox.append(pong1) { full += 1; if full > MCPHTTPOutbox.maxMessages + 1 { break } }
        XCTAssertEqual(full, MCPHTTPOutbox.maxMessages, "bounded in messages")
        XCTAssertFalse(outbox.append(cancelled), "a full outbox takes nothing more: the transport fails")
        outbox.removeAll()
        let big = [UInt8](repeating: 0x20, count: MCPHTTPOutbox.maxBytes / 2)
        XCTAssertTrue(outbox.append(big))
        XCTAssertTrue(outbox.append(big))
        XCTAssertFalse(outbox.append(pong1), "bounded in bytes")
        XCTAssertEqual(outbox.bytes, MCPHTTPOutbox.maxBytes)
    }
}
