import XCTest

@testable import ConfabProtocol

final class RPCClassifyTests: XCTestCase {

    private func frame(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> RPCFrame? {
        switch RPC.parse(Array(text.utf8)) {
        case .success(let frame): return frame
        case .failure(let failure):
            XCTFail("\(text) failed: \(failure)", file: file, line: line)
            return nil
        }
    }

    private func failure(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> RPCFailure? {
        failure(bytes: Array(text.utf8), label: text, file: file, line: line)
    }

    private func failure(bytes: [UInt8], label: String, file: StaticString = #filePath, line: UInt = #line) -> RPCFailure? {
        switch RPC.parse(bytes) {
        case .success(let frame):
            XCTFail("\(label) was accepted as \(frame)", file: file, line: line)
            return nil
        case .failure(let failure): return failure
        }
    }

    private func assertInvalidRequest(_ text: String, id: JSON, file: StaticString = #filePath, line: UInt = #line) {
        guard let failure = failure(text, file: file, line: line) else { return }
        XCTAssertEqual(failure.error.code, RPCError.invalidRequest, text, file: file, line: line)
        XCTAssertEqual(failure.error.code, -32600, file: file, line: line)
        XCTAssertEqual(failure.id, id, "id of the error for \(text)", file: file, line: line)
    }

    // MARK: - Accepted frames

    func testRequest() {
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":1,"method":"status"}"#),
                       .request(id: 1, method: "status", params: nil))
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":"abc","method":"hello","params":{"client":"x"}}"#),
                       .request(id: "abc", method: "hello", params: ["client": "x"]))
        XCTAssertEqual(frame(#"{"params":[1,2],"method":"m","id":-7,"jsonrpc":"2.0"}"#),
                       .request(id: -7, method: "m", params: [1, 2]))
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":"","method":"m"}"#), .request(id: "", method: "m", params: nil))
    }

    func testRequestWithNullIdIsARequestNotANotification() {
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":null,"method":"status"}"#),
                       .request(id: nil, method: "status", params: nil))
    }

    func testNotificationHasNoId() {
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","method":"message.delta","params":{"content":"x"}}"#),
                       .notification(method: "message.delta", params: ["content": "x"]))
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","method":"ping"}"#), .notification(method: "ping", params: nil))
    }

    func testResponse() {
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":4,"result":{"ok":true}}"#), .response(id: 4, result: ["ok": true]))
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":"x","result":null}"#), .response(id: "x", result: nil))
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":5,"result":[]}"#), .response(id: 5, result: []))
    }

    func testErrorResponse() {
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found"}}"#),
                       .errorResponse(id: 2, error: RPCError(code: -32601, message: "method not found")))
        XCTAssertEqual(frame(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse","data":{"x":1}}}"#),
                       .errorResponse(id: nil, error: RPCError(code: -32700, message: "parse", data: ["x": 1])))
    }

    func testMalformedErrorObjectIsInvalid() {
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":2,"error":"boom"}"#, id: 2)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":2,"error":{"code":"x","message":"m"}}"#, id: 2)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":2,"error":{"code":1}}"#, id: 2)
    }

    func testIntegralDoubleIdBecomesInteger() {
        let json: JSON = ["jsonrpc": "2.0", "id": .double(7.0), "method": "m"]
        XCTAssertEqual(try RPC.classify(json).get(), .request(id: .int(7), method: "m", params: nil))
    }

    // MARK: - Parse errors

    func testParseErrorHasNullId() {
        for text in ["{", "not json", #"{"jsonrpc":"2.0","id":1,"method":"x""#, #"{"jsonrpc":"2.0","id":1} trailing"#, ""] {
            guard let failure = failure(text) else { continue }
            XCTAssertEqual(failure.error.code, RPCError.parseError, text)
            XCTAssertEqual(failure.error.code, -32700)
            XCTAssertEqual(failure.id, .null, text)
        }
    }

    func testInvalidUTF8IsAParseError() {
        let bytes = Array(#"{"jsonrpc":"2.0","id":1,"method":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        guard let failure = failure(bytes: bytes, label: "invalid UTF-8") else { return }
        XCTAssertEqual(failure.error.code, RPCError.parseError)
        XCTAssertEqual(failure.id, .null)
    }

    // MARK: - Invalid requests

    func testNonObjectFrames() {
        assertInvalidRequest("[1,2]", id: nil)
        assertInvalidRequest(#"[{"jsonrpc":"2.0","id":1,"method":"status"}]"#, id: nil)
        assertInvalidRequest("42", id: nil)
        assertInvalidRequest("\"status\"", id: nil)
        assertInvalidRequest("null", id: nil)
        assertInvalidRequest("true", id: nil)
    }

    func testMissingOrWrongJSONRPCKeepsTheId() {
        assertInvalidRequest(#"{"id":1,"method":"status"}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"1.0","id":"a","method":"status"}"#, id: "a")
        assertInvalidRequest(#"{"jsonrpc":2.0,"id":3,"method":"status"}"#, id: 3)
        assertInvalidRequest(#"{"jsonrpc":"2","id":3,"method":"status"}"#, id: 3)
        assertInvalidRequest(#"{"jsonrpc":null,"id":3,"method":"status"}"#, id: 3)
        assertInvalidRequest(#"{"id":4,"result":{}}"#, id: 4)
    }

    func testBadIdTypesAnswerWithNullId() {
        // Just past Int's range, or a fraction too small for Double to keep: the nearest Double
        // is integral, but the number is not an integer id (found by scripts/fuzz-socket.py).
        for id in [#"{"a":1}"#, "[1]", "[]", "true", "false", "1.5", "-0.5", "1e300", "-9223372036854775809",
                   "9223372036854775808", "10000000000000000.5"] {
            assertInvalidRequest(#"{"jsonrpc":"2.0","id":\#(id),"method":"status"}"#, id: nil)
        }
    }

    func testBadIdInClassify() {
        for id: JSON in [.bool(true), .double(2.5), .object([:]), .array([1])] {
            let result = RPC.classify(["jsonrpc": "2.0", "id": id, "method": "m"])
            guard case .failure(let failure) = result else { XCTFail("id \(id) accepted"); continue }
            XCTAssertEqual(failure.error.code, RPCError.invalidRequest)
            XCTAssertEqual(failure.id, .null)
        }
    }

    func testMissingMethod() {
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":9}"#, id: 9)
        assertInvalidRequest(#"{"jsonrpc":"2.0"}"#, id: nil)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":"q","params":{}}"#, id: "q")
    }

    func testEmptyOrNonStringMethod() {
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":""}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":5}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":null}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":["a"]}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","method":""}"#, id: nil)
    }

    func testParamsMustBeObjectOrArray() {
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":"m","params":42}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":"m","params":true}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#, id: 1)
        assertInvalidRequest(#"{"jsonrpc":"2.0","method":"m","params":"x"}"#, id: nil)
    }

    func testErrorMessagesAreNotEmpty() {
        for text in ["[]", #"{"id":1,"method":"m"}"#, #"{"jsonrpc":"2.0","id":true,"method":"m"}"#, "{"] {
            guard let failure = failure(text) else { continue }
            XCTAssertFalse(failure.error.message.isEmpty, text)
        }
    }
}

final class RPCEncodeTests: XCTestCase {

    private func assertOneLine(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> RPCFrame? {
        XCTAssertEqual(bytes.last, 0x0A, "ends in a newline", file: file, line: line)
        XCTAssertEqual(bytes.filter { $0 == 0x0A }.count, 1, "exactly one newline", file: file, line: line)
        var framer = LineFramer(maxLineBytes: 1 << 20)
        var lines: [[UInt8]] = []
        XCTAssertNoThrow(try framer.feed(bytes) { lines.append(Array($0)) }, file: file, line: line)
        XCTAssertEqual(lines.count, 1, file: file, line: line)
        XCTAssertEqual(framer.bufferedByteCount, 0, file: file, line: line)
        guard let only = lines.first else { return nil }
        switch RPC.parse(only) {
        case .success(let frame): return frame
        case .failure(let failure):
            XCTFail("did not parse back: \(failure)", file: file, line: line)
            return nil
        }
    }

    func testRequestEncoding() {
        let params: JSON = ["content": "multi\nline \"quoted\" é", "n": 3]
        XCTAssertEqual(assertOneLine(RPC.request(id: 12, method: "message.send", params: params)),
                       .request(id: 12, method: "message.send", params: params))
        XCTAssertEqual(assertOneLine(RPC.request(id: "s", method: "status")), .request(id: "s", method: "status", params: nil))
    }

    func testRequestEncodingIsCompactAndSorted() {
        XCTAssertEqual(String(decoding: RPC.request(id: 1, method: "status", params: [:]), as: UTF8.self),
                       "{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"status\",\"params\":{}}\n")
    }

    func testNotificationEncoding() {
        let params: JSON = ["conversation": "k3v9q2m8x7ad", "message": "m2", "content": "Hi\n"]
        XCTAssertEqual(assertOneLine(RPC.notification(method: "message.delta", params: params)),
                       .notification(method: "message.delta", params: params))
    }

    func testDeltaFrameIsTheSameBytesAsTheGeneralEncoder() {
        let texts = ["Hi", "", " there", "line\nbreak\ttab\r", "quote \" backslash \\ slash /", "\u{0}\u{1}\u{1F}\u{7F}",
                     "é 日本 🎉 \u{2028}\u{2029}", "\u{1B}[31mred\u{1B}[0m", String(repeating: "long ", count: 400)]
        for content in texts {
            for (conversation, message) in [("k3v9q2m8x7ad", "m2"), ("", ""), ("odd\"id", "m\n")] {
                let general = RPC.notification(method: "message.delta", params: [
                    "conversation": .string(conversation), "message": .string(message), "content": .string(content)])
                XCTAssertEqual(RPC.deltaNotification(conversation: conversation, message: message, content: content), general,
                               content.debugDescription)
            }
        }
    }

    func testDeltaFrameAppendsToWhatTheBufferHolds() {
        var buffer = Array("previous\n".utf8)
        RPC.writeDelta(conversation: "k3v9q2m8x7ad", message: "m2", content: "Hi", into: &buffer)
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self),
                       "previous\n" + #"{"jsonrpc":"2.0","method":"message.delta","params":{"content":"Hi","conversation":"k3v9q2m8x7ad","message":"m2"}}"# + "\n",
                       "the frame of docs/protocol.md's example")
    }

    func testResponseEncoding() {
        XCTAssertEqual(assertOneLine(RPC.response(id: 4, result: ["reply": "m2"])), .response(id: 4, result: ["reply": "m2"]))
        XCTAssertEqual(assertOneLine(RPC.response(id: nil, result: nil)), .response(id: nil, result: nil))
    }

    func testErrorResponseEncoding() {
        let error = RPCError(code: RPCError.lineTooLong, message: "line too long\nreally", data: ["limit": 8])
        XCTAssertEqual(assertOneLine(RPC.response(id: nil, error: error)), .errorResponse(id: nil, error: error))
        let plain = RPCError.invalidParams("missing parameter \"conversation\"")
        XCTAssertEqual(assertOneLine(RPC.response(id: "r1", error: plain)), .errorResponse(id: "r1", error: plain))
        XCTAssertEqual(plain.json, ["code": -32602, "message": "missing parameter \"conversation\""], "no data key without data")
    }

    func testErrorCodesMatchTheProtocolDocument() {
        XCTAssertEqual(RPCError.parseError, -32700)
        XCTAssertEqual(RPCError.invalidRequest, -32600)
        XCTAssertEqual(RPCError.methodNotFound, -32601)
        XCTAssertEqual(RPCError.invalidParams, -32602)
        XCTAssertEqual(RPCError.internalError, -32603)
        XCTAssertEqual(RPCError.notFound, -32001)
        XCTAssertEqual(RPCError.lineTooLong, -32002)
        XCTAssertEqual(RPCError.storageFailed, -32003)
        XCTAssertEqual(RPCError.limitReached, -32004)
        XCTAssertEqual(RPCError.shuttingDown, -32005)
        XCTAssertEqual(RPCError.notFound("x").code, -32001)
    }

    func testRPCErrorJSONRoundTrip() {
        let error = RPCError(code: -32003, message: "disk full", data: ["errno": 28])
        XCTAssertEqual(RPCError(json: error.json), error)
        XCTAssertNil(RPCError(json: ["message": "m"]))
        XCTAssertNil(RPCError(json: ["code": 1]))
        XCTAssertNil(RPCError(json: "x"))
    }
}

final class ParamsTests: XCTestCase {

    private func assertInvalidParams(_ body: () throws -> Void, mentions needles: [String],
                                     file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard let error = error as? RPCError else { return XCTFail("not an RPCError: \(error)", file: file, line: line) }
            XCTAssertEqual(error.code, RPCError.invalidParams, file: file, line: line)
            for needle in needles {
                XCTAssertTrue(error.message.contains(needle), "\"\(error.message)\" should mention \(needle)", file: file, line: line)
            }
        }
    }

    func testNonObjectParamsAreRejected() {
        for params: JSON in [[1, 2], "x", 3, true] {
            assertInvalidParams({ _ = try Params(params) }, mentions: ["object"])
        }
    }

    func testAbsentOrNullParamsAreEmpty() throws {
        XCTAssertTrue(try Params(nil).members.isEmpty)
        XCTAssertTrue(try Params(.null).members.isEmpty)
        XCTAssertTrue(try Params([:]).members.isEmpty)
    }

    func testString() throws {
        let params = try Params(["conversation": "abc", "n": 5, "z": nil])
        XCTAssertEqual(try params.string("conversation"), "abc")
        assertInvalidParams({ _ = try params.string("title") }, mentions: ["missing", "\"title\""])
        assertInvalidParams({ _ = try params.string("n") }, mentions: ["\"n\"", "string", "number"])
        assertInvalidParams({ _ = try params.string("z") }, mentions: ["\"z\"", "string", "null"])
    }

    func testMissingAndWrongTypeMessagesDiffer() throws {
        let params = try Params(["content": 1])
        var missing = ""
        var wrong = ""
        do { _ = try params.string("conversation") } catch { missing = error.message }
        do { _ = try params.string("content") } catch { wrong = error.message }
        XCTAssertTrue(missing.contains("conversation"))
        XCTAssertTrue(wrong.contains("content"))
        XCTAssertTrue(missing.contains("missing"), missing)
        XCTAssertFalse(wrong.contains("missing"), wrong)
    }

    func testOptionalString() throws {
        let params = try Params(["title": "t", "system": nil, "model": ["x"]])
        XCTAssertEqual(try params.optionalString("title"), "t")
        XCTAssertNil(try params.optionalString("system"))
        XCTAssertNil(try params.optionalString("absent"))
        assertInvalidParams({ _ = try params.optionalString("model") }, mentions: ["\"model\"", "string", "array"])
    }

    func testOptionalInt() throws {
        let params = try Params(["limit": 10, "low": 0, "high": 10001, "frac": 2.5, "whole": 3.0, "text": "5", "null": nil,
                                 "neg": -1, "big": 1e300])
        XCTAssertEqual(try params.optionalInt("limit", in: 1...10000), 10)
        XCTAssertEqual(try params.optionalInt("whole", in: 1...10), 3)
        XCTAssertNil(try params.optionalInt("absent", in: 1...10))
        XCTAssertNil(try params.optionalInt("null", in: 1...10))
        XCTAssertEqual(try params.optionalInt("low", in: 0...1000), 0, "lower bound is inclusive")
        XCTAssertEqual(try params.optionalInt("limit", in: 1...10), 10, "upper bound is inclusive")
        assertInvalidParams({ _ = try params.optionalInt("low", in: 1...10000) }, mentions: ["\"low\"", "1", "10000"])
        assertInvalidParams({ _ = try params.optionalInt("high", in: 1...10000) }, mentions: ["\"high\"", "1", "10000"])
        assertInvalidParams({ _ = try params.optionalInt("neg", in: 0...1000) }, mentions: ["\"neg\""])
        assertInvalidParams({ _ = try params.optionalInt("frac", in: 1...10) }, mentions: ["\"frac\"", "integer"])
        assertInvalidParams({ _ = try params.optionalInt("text", in: 1...10) }, mentions: ["\"text\"", "integer", "string"])
        assertInvalidParams({ _ = try params.optionalInt("big", in: 1...10) }, mentions: ["\"big\""])
    }
}
