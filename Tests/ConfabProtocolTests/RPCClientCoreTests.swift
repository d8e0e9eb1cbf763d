import XCTest

import ConfabProtocol

/// The client's side of the socket as a state machine: the bytes the daemon sends in, events
/// out, in order, with answers matched to their requests by id.
final class RPCClientCoreTests: XCTestCase {
    private func bytes(_ lines: String...) -> [UInt8] { Array(lines.map { $0 + "\n" }.joined().utf8) }

    func testRequestsGetIdsOfTheirOwnAndTypedParams() throws {
        var core = RPCClientCore()
        let first = core.request(ListCall.self, ListParams(limit: 5))
        let second = core.request(.status)
        XCTAssertEqual([first.id, second.id], [1, 2])
        XCTAssertEqual(try JSON.parse(first.frame.dropLast()), ["jsonrpc": "2.0", "id": 1, "method": "conversation.list", "params": ["limit": 5]])
        XCTAssertEqual(first.frame.last, 0x0A, "one line each")
        XCTAssertEqual(core.waiting, [1, 2])
    }

    func testNotificationsInterleavedWithAnswersComeInArrivalOrder() throws {
        var core = RPCClientCore()
        let send = core.request(.messageSend, ["conversation": "c", "content": "hi"])
        // An answer split across reads, with a delta before it and one inside the same read.
        let all = bytes(#"{"jsonrpc":"2.0","method":"message.delta","params":{"conversation":"c","message":"m2","content":"He"}}"#,
                        #"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#,
                        #"{"jsonrpc":"2.0","method":"message.delta","params":{"conversation":"c","message":"m2","content":"llo"}}"#)
        let cut = 120
        var events = try core.receive(Array(all[..<cut]))
        XCTAssertEqual(events, [.notification(.conversation("c", .messageDelta(message: "m2", content: "He")))], "a line not ended yet waits")
        events = try core.receive(Array(all[cut...]))
        XCTAssertEqual(events, [.answer(id: send.id, result: .success(["ok": true])),
                                .notification(.conversation("c", .messageDelta(message: "m2", content: "llo")))])
        XCTAssertTrue(core.waiting.isEmpty)
    }

    func testAnswersOutOfOrderAreMatchedByIdAndAStrangersAnswerIsIgnored() throws {
        var core = RPCClientCore()
        let a = core.request(.status)
        let b = core.request(.profilesList)
        let c = core.request(.conversationList, ["limit": 1])
        let events = try core.receive(bytes(#"{"jsonrpc":"2.0","id":3,"result":"third"}"#,
                                            #"{"jsonrpc":"2.0","id":99,"result":"nobody asked"}"#,
                                            #"{"jsonrpc":"2.0","id":1,"result":"first"}"#,
                                            #"{"jsonrpc":"2.0","id":1,"result":"first again"}"#,
                                            #"{"jsonrpc":"2.0","id":"2","result":"a string id is not ours"}"#,
                                            #"{"jsonrpc":"2.0","id":2.0,"result":"second"}"#))
        XCTAssertEqual(events, [.answer(id: c.id, result: .success("third")), .answer(id: a.id, result: .success("first")),
                                .answer(id: b.id, result: .success("second"))])
        XCTAssertEqual(core.ignoredLines, 3, "an unknown id, an answer given twice, and an id of another type")
    }

    func testAnErrorAnswerAndAnErrorToNoRequest() throws {
        var core = RPCClientCore()
        let get = core.request(.conversationGet, ["conversation": "nope"])
        let events = try core.receive(bytes(#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no conversation nope","data":{"x":1}}}"#,
                                            #"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#))
        XCTAssertEqual(events, [.answer(id: get.id, result: .failure(RPCError(code: RPCError.notFound, message: "no conversation nope", data: ["x": 1]))),
                                .fatal(RPCError(code: RPCError.parseError, message: "parse error"))])
    }

    func testAMalformedLineIsSkippedAndWhatFollowsIsRead() throws {
        var core = RPCClientCore()
        let status = core.request(.status)
        let events = try core.receive(bytes(#"{"jsonrpc":"2.0","id":1,"result""#, "not json at all", "[1,2]", #"{"id":1,"result":{}}"#,
                                            "   ", #"{"jsonrpc":"2.0","method":"no.such.notification","params":{}}"#,
                                            #"{"jsonrpc":"2.0","id":1,"result":{"conversations":0}}"#))
        XCTAssertEqual(events, [.answer(id: status.id, result: .success(["conversations": 0]))])
        XCTAssertEqual(core.ignoredLines, 4, "three unreadable lines and a frame without jsonrpc; a blank line and an unknown notification are not errors")
    }

    func testARequestFromTheDaemonIsAnsweredMethodNotFound() throws {
        var core = RPCClientCore()
        let events = try core.receive(bytes(#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}"#))
        guard case .send(let frame)? = events.first, events.count == 1 else { return XCTFail("\(events)") }
        let answer = try JSON.parse(frame.dropLast())
        XCTAssertEqual(answer["id"], 7)
        XCTAssertEqual(answer["error"]?["code"]?.int, RPCError.methodNotFound)
    }

    func testALineTooLongLosesTheFraming() throws {
        var core = RPCClientCore(maxLineBytes: 64)
        XCTAssertThrowsError(try core.receive(Array(repeating: 0x41, count: 65)))
        XCTAssertThrowsError(try core.receive(bytes("{}")), "the framing stays lost")
    }

    func testTypedResultsAreReadThroughTheirCall() throws {
        let listing = try RPCClientCore.decode(ListCall.self, ["conversations": []])
        XCTAssertEqual(listing.conversations, [])
        XCTAssertThrowsError(try RPCClientCore.decode(ListCall.self, ["conversations": "many"])) { error in
            let error = error as? RPCClientCore.UnreadableAnswer
            XCTAssertEqual(error?.method, .conversationList)
            XCTAssertEqual(error?.problem.code, RPCError.invalidParams)
            XCTAssertTrue(error?.description.hasPrefix("the answer to conversation.list is not one this client reads: ") == true, "\(String(describing: error))")
            XCTAssertTrue(error?.problem.message.contains("conversations") == true, "the field is named")
        }
    }

    func testAnAbandonedRequestsAnswerIsIgnored() throws {
        var core = RPCClientCore()
        let id = core.request(.status).id
        core.abandon(id)
        XCTAssertEqual(try core.receive(bytes(#"{"jsonrpc":"2.0","id":1,"result":{}}"#)), [])
    }
}

/// A file read back in pieces: each must be the next.
final class AttachmentAssemblyTests: XCTestCase {
    private let file = Attachment(name: "a.txt", type: .text, size: 5, sha256: String(repeating: "0", count: 64))

    private func piece(_ text: String, at offset: Int, more: Bool, of file: Attachment? = nil) -> AttachmentGetResult {
        AttachmentGetResult(attachment: file ?? self.file, offset: offset, data: Base64.encode(Array(text.utf8)), more: more)
    }

    func testPiecesInOrderMakeTheFile() throws {
        var assembly = AttachmentAssembly()
        XCTAssertEqual(assembly.nextParams(conversation: "c", message: "m1", index: 0).offset, 0)
        XCTAssertFalse(try assembly.take(piece("hel", at: 0, more: true)))
        XCTAssertEqual(assembly.nextParams(conversation: "c", message: "m1", index: 0).offset, 3)
        XCTAssertTrue(try assembly.take(piece("lo", at: 3, more: false)))
        XCTAssertEqual(String(decoding: assembly.bytes, as: UTF8.self), "hello")
        XCTAssertEqual(assembly.attachment, file)
    }

    func testAPieceAtTheWrongOffsetIsRefused() throws {
        var assembly = AttachmentAssembly()
        try assembly.take(piece("hel", at: 0, more: true))
        XCTAssertThrowsError(try assembly.take(piece("lo", at: 0, more: false))) { error in
            XCTAssertEqual(error as? AttachmentAssembly.Failure, .wrongOffset(expected: 3, got: 0))
        }
        var other = AttachmentAssembly()
        XCTAssertThrowsError(try other.take(piece("lo", at: 3, more: false)), "a first piece that does not start the file") { error in
            XCTAssertEqual(error as? AttachmentAssembly.Failure, .wrongOffset(expected: 0, got: 3))
        }
    }

    func testAnotherFileTooMuchTooLittleAndEmptyPieces() throws {
        var assembly = AttachmentAssembly()
        try assembly.take(piece("he", at: 0, more: true))
        var changed = file
        changed.size = 6
        XCTAssertThrowsError(try assembly.take(piece("llo", at: 2, more: false, of: changed))) { XCTAssertEqual($0 as? AttachmentAssembly.Failure, .otherFile) }
        XCTAssertThrowsError(try assembly.take(piece("llo!", at: 2, more: false))) { XCTAssertEqual($0 as? AttachmentAssembly.Failure, .badData) }
        XCTAssertThrowsError(try assembly.take(AttachmentGetResult(attachment: file, offset: 2, data: "%%%", more: true))) {
            XCTAssertEqual($0 as? AttachmentAssembly.Failure, .badData)
        }
        XCTAssertThrowsError(try assembly.take(piece("l", at: 2, more: false))) { XCTAssertEqual($0 as? AttachmentAssembly.Failure, .short(expected: 5, got: 3)) }
        var empty = AttachmentAssembly()
        XCTAssertThrowsError(try empty.take(piece("", at: 0, more: true))) { XCTAssertEqual($0 as? AttachmentAssembly.Failure, .tooManyPieces) }
        var huge = file
        huge.size = AttachmentLimits.maxImageBytes + 1
        var tooBig = AttachmentAssembly()
        XCTAssertThrowsError(try tooBig.take(piece("h", at: 0, more: true, of: huge))) { XCTAssertEqual($0 as? AttachmentAssembly.Failure, .otherFile) }
    }
}
