@testable import ConfabProtocol
import XCTest

/// Answers kept as bytes (`requestEncoded`, `EncodedHistoryPage`) and JSON text made
/// terminal-safe without its value (`JSON.writeTerminalSafe(encoded:)`): the bytes `confab
/// export` writes must be exactly those the parsed values would give.
final class EncodedAnswersTests: XCTestCase {
    /// Strings with everything a terminal acts on or a bidi control, beside the usual.
    static let hostile = ["plain", "quote \" backslash \\ slash /", "line\nfeed\rreturn\ttab", "esc \u{1B}[31mred\u{1B}[0m bell \u{07}",
                          "del \u{7F} c1 \u{80}\u{9B}\u{9F}", "bidi \u{202E}evil\u{202C} \u{2066}\u{2069} \u{200E}\u{200F} \u{061C}",
                          "separators \u{2028}\u{2029}", "emoji 🙂 and 漢字 and é", "nul \u{0}", ""]

    func testTheEncodedCopyIsTheValuesTerminalSafeText() throws {
        var generator = SystemRandomNumberGenerator()
        var values: [JSON] = Self.hostile.map { .string($0) }
        values.append(.object(Dictionary(uniqueKeysWithValues: Self.hostile.enumerated().map { ("k\($0.offset) \($0.element)", JSON.string($0.element)) })))
        values.append(["messages": .array(Self.hostile.map { ["content": .string($0), "n": 1.5, "big": 1e300, "neg": -3, "ok": true, "none": nil] })])
        // Random strings drawn from the hostile scalars and plain ones, nested.
        let scalars: [Unicode.Scalar] = Array("ab \"\\/\n\r\t\u{0}\u{1B}\u{7F}\u{80}\u{9B}\u{85}\u{A0}é漢🙂\u{2028}\u{202E}\u{2066}\u{200F}\u{061C}\u{FEFF}".unicodeScalars)
        for _ in 0..<300 {
            let text = String(String.UnicodeScalarView((0..<Int.random(in: 0...40, using: &generator)).map { _ in scalars.randomElement(using: &generator)! }))
            values.append(["a": .string(text), "b": .array([.string(text), .int(Int.random(in: -999...999, using: &generator))])])
        }
        for value in values {
            var copied: [UInt8] = []
            value.bytes.withUnsafeBufferPointer { JSON.writeTerminalSafe(encoded: $0, into: &copied) }
            XCTAssertEqual(String(decoding: copied, as: UTF8.self), value.terminalSafeText, value.text)
        }
    }

    /// An export writes a page message by message into one buffer: the buffer must grow as
    /// appending grows it, not be reallocated (and copied whole) for every message.
    func testOneBufferWrittenMessageByMessageIsReallocatedLogarithmicallyOften() {
        let message = Array(#"{"content":"a message of some length, repeated","id":"m1"}"#.utf8)
        var out: [UInt8] = []
        var reallocations = 0
        message.withUnsafeBufferPointer { encoded in
            for _ in 0..<2_000 {
                let capacity = out.capacity
                JSON.writeTerminalSafe(encoded: encoded, into: &out)
                if out.capacity != capacity { reallocations += 1 }
            }
        }
        XCTAssertEqual(out.count, 2_000 * message.count)
        XCTAssertLessThanOrEqual(reallocations, 20)
    }

    func testTextWithWhiteSpaceBetweenTokensComesOutOnOneLineAndSafe() throws {
        let pretty = "{\r\n\t\"a\" : [ 1 ,\n 2 ],\n \"b\": \"x\u{7F}\u{9B}\u{202E}y\"\n}"
        _ = try JSON.parse(pretty)  // valid JSON, as the copy requires
        var copied: [UInt8] = []
        Array(pretty.utf8).withUnsafeBufferPointer { JSON.writeTerminalSafe(encoded: $0, into: &copied) }
        XCTAssertFalse(copied.contains { $0 < 0x20 || $0 == 0x7F }, "no control byte left")
        XCTAssertEqual(String(decoding: copied, as: UTF8.self), "{\"a\" : [ 1 , 2 ], \"b\": \"x\\u007f\\u009b\\u202ey\"}")
        XCTAssertEqual(try JSON.parse(copied), try JSON.parse(pretty))
    }

    func testAnEncodedRequestGetsItsAnswerAsBytesAndOthersAsValues() throws {
        var core = RPCClientCore()
        let (encoded, _) = core.requestEncoded(.conversationHistory, ["conversation": "c"])
        let (plain, _) = core.request(.status)
        let (failing, _) = core.requestEncoded(.conversationHistory, ["conversation": "gone"])
        let result: JSON = ["messages": [["id": "m1", "content": "hi\u{1B}"]], "more": false]
        var bytes = RPC.response(id: .int(plain), result: ["clients": 1])
        bytes += RPC.notification(method: "message.delta", params: ["conversation": "c", "message": "m2", "content": "x"])
        bytes += RPC.response(id: .int(encoded), result: result)
        bytes += RPC.response(id: .int(failing), error: .notFound("no conversation gone"))
        let events = try core.receive(bytes)
        XCTAssertEqual(events.count, 4)
        XCTAssertEqual(events[0], .answer(id: plain, result: .success(["clients": 1])))
        guard case .notification = events[1] else { return XCTFail("\(events[1])") }
        guard case .encodedAnswer(let id, let answer) = events[2] else { return XCTFail("\(events[2])") }
        XCTAssertEqual(id, encoded)
        XCTAssertEqual(try JSON.parse(answer.line[answer.result]), result)
        XCTAssertEqual(answer.line[answer.result], result.bytes[...])
        guard case .answer(failing, .failure(let error)) = events[3] else { return XCTFail("\(events[3])") }
        XCTAssertEqual(error.code, RPCError.notFound)
        XCTAssertTrue(core.waiting.isEmpty)
    }

    /// A line that only looks like the answer (invalid JSON, a second "id") is not taken as bytes.
    func testOnlyAValidAnswerIsTakenAsBytes() throws {
        var core = RPCClientCore()
        let (id, _) = core.requestEncoded(.conversationHistory, ["conversation": "c"])
        XCTAssertEqual(try core.receive(Array("{\"id\":\(id),\"jsonrpc\":\"2.0\",\"result\":{\"more\":tru}}\n".utf8)), [])
        XCTAssertEqual(core.ignoredLines, 1)
        XCTAssertEqual(core.waiting, [id])
        let events = try core.receive(Array("{\"id\":\(id),\"jsonrpc\":\"2.0\",\"result\":{\"more\":true}}\n".utf8))
        guard case .encodedAnswer(id, let answer) = events.first else { return XCTFail("\(events)") }
        XCTAssertEqual(String(decoding: answer.line[answer.result], as: UTF8.self), "{\"more\":true}")
    }

    func testAHistoryPageIsSlicedIntoItsMessages() throws {
        let messages: [JSON] = Self.hostile.enumerated().map { ["id": .string("m\($0.offset + 7)"), "content": .string($0.element), "role": "user"] }
        let result: JSON = ["compaction": ["first": "m1", "last": "m3"], "messages": .array(messages), "more": true]
        let line = RPC.response(id: 4, result: result).dropLast()
        let (_, range) = try XCTUnwrap(EncodedAnswer.peek(line))
        let page = try EncodedHistoryPage(EncodedAnswer(line: Array(line), result: range))
        XCTAssertTrue(page.more)
        XCTAssertEqual(page.firstID, "m7")
        XCTAssertEqual(try page.messages.map { try JSON.parse(page.answer.line[$0]) }, messages)
        var out: [UInt8] = []
        page.writeMessages(into: &out, separator: 0x0A)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), messages.map { $0.terminalSafeText + "\n" }.joined())

        let empty = RPC.response(id: 5, result: ["messages": [], "more": false]).dropLast()
        let emptyPage = try EncodedHistoryPage(EncodedAnswer(line: Array(empty), result: try XCTUnwrap(EncodedAnswer.peek(empty)).result))
        XCTAssertEqual(emptyPage.messages, [])
        XCTAssertFalse(emptyPage.more)
        XCTAssertNil(emptyPage.firstID)

        let notAPage = RPC.response(id: 6, result: ["messages": []]).dropLast()
        XCTAssertThrowsError(try EncodedHistoryPage(EncodedAnswer(line: Array(notAPage), result: try XCTUnwrap(EncodedAnswer.peek(notAPage)).result)))
    }
}
