import XCTest

import SSE
@testable import Upstream

final class SSEParserTests: XCTestCase {

    // MARK: - Helpers

    /// Feeds `chunks` one after the other, then `finish()`; returns every dispatched event.
    private func parse(chunks: [[UInt8]], maxLineBytes: Int = 4 << 20) throws -> [SSEEvent] {
        var parser = SSEParser(maxLineBytes: maxLineBytes)
        var events: [SSEEvent] = []
        for chunk in chunks {
            events += try parser.feed(chunk)
        }
        parser.finish()
        return events
    }

    private func parse(_ text: String, maxLineBytes: Int = 4 << 20) throws -> [SSEEvent] {
        try parse(chunks: [Array(text.utf8)], maxLineBytes: maxLineBytes)
    }

    private func parse(bytes: [UInt8]) throws -> [SSEEvent] {
        try parse(chunks: [bytes])
    }

    private func data(_ events: [SSEEvent]) -> [String] {
        events.map(\.data)
    }

    /// A realistic OpenAI-style stream, with comments, keep-alives, multi-byte UTF-8, an `id`,
    /// an explicit `event: message`, a `retry`, a usage-only chunk and `[DONE]`, using `newline`
    /// as line terminator.
    private func realisticStream(newline: String) -> [UInt8] {
        let lines = [
            ": OPENROUTER PROCESSING", "",
            #"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            "",
            #"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Héllo"},"finish_reason":null}]}"#,
            "",
            ": keep-alive",
            "retry: 3000",
            "id: 7",
            "event: message",
            #"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" 世界 👋🏽"},"finish_reason":null}]}"#,
            "",
            ":",
            "",
            #"data:{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "",
            "data: {\"id\":\"chatcmpl-1\",",
            "data: \"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}",
            "",
            "data: [DONE]",
            "",
        ]
        return Array(lines.map { $0 + newline }.joined().utf8)
    }

    private let realisticExpected: [SSEEvent] = [
        SSEEvent(data: #"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#),
        SSEEvent(data: #"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Héllo"},"finish_reason":null}]}"#),
        SSEEvent(type: "message", data: #"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" 世界 👋🏽"},"finish_reason":null}]}"#, id: "7"),
        SSEEvent(data: #"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
        SSEEvent(data: "{\"id\":\"chatcmpl-1\",\n\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}"),
        SSEEvent(data: "[DONE]"),
    ]

    // MARK: - Line endings

    func testLFLineEndings() throws {
        XCTAssertEqual(try parse("data: a\n\ndata: b\n\n"), [SSEEvent(data: "a"), SSEEvent(data: "b")])
    }

    func testCRLFLineEndings() throws {
        XCTAssertEqual(try parse("data: a\r\n\r\ndata: b\r\n\r\n"), [SSEEvent(data: "a"), SSEEvent(data: "b")])
    }

    func testCRLineEndings() throws {
        XCTAssertEqual(try parse("data: a\r\rdata: b\r\r"), [SSEEvent(data: "a"), SSEEvent(data: "b")])
    }

    func testMixedLineEndings() throws {
        // CRLF, LF and CR in one stream; "\n\r" is two line ends (LF, then CR).
        XCTAssertEqual(
            try parse("data: a\r\ndata: b\ndata: c\r\n\rdata: d\n\r"),
            [SSEEvent(data: "a\nb\nc"), SSEEvent(data: "d")])
    }

    func testCRLFIsOneLineEndNotTwo() throws {
        // If CRLF counted as two line ends, "a" would be dispatched on its own.
        XCTAssertEqual(try parse("data: a\r\ndata: b\r\n\r\n"), [SSEEvent(data: "a\nb")])
    }

    func testCRThenLFSplitAcrossFeedsIsOneLineEnd() throws {
        let events = try parse(chunks: [Array("data: a\r".utf8), Array("\ndata: b\r\n\r\n".utf8)])
        XCTAssertEqual(events, [SSEEvent(data: "a\nb")])
    }

    func testCRAtEndOfFeedFollowedByOtherByte() throws {
        let events = try parse(chunks: [Array("data: a\r".utf8), Array("data: b\r".utf8), Array("\r".utf8)])
        XCTAssertEqual(events, [SSEEvent(data: "a\nb")])
    }

    func testCRAtEndOfFeedSurvivesEmptyFeed() throws {
        let events = try parse(chunks: [Array("data: a\r".utf8), [], Array("\ndata: b\n\n".utf8)])
        XCTAssertEqual(events, [SSEEvent(data: "a\nb")])
    }

    func testCRAtEndOfFeedThenLFThenLFDispatchesOnSecondLF() throws {
        var parser = SSEParser()
        XCTAssertEqual(try parser.feed(Array("data: a\r".utf8)), [])
        XCTAssertEqual(try parser.feed([0x0A]), [])  // completes the CRLF: no empty line yet
        XCTAssertEqual(try parser.feed([0x0A]), [SSEEvent(data: "a")])
    }

    func testCRAsBlankLineAtEndOfFeedDispatchesImmediately() throws {
        var parser = SSEParser()
        XCTAssertEqual(try parser.feed(Array("data: a\n\r".utf8)), [SSEEvent(data: "a")])
        // The LF completing that CR must not be seen as one more (harmless) empty line either way.
        XCTAssertEqual(try parser.feed(Array("\ndata: b\n\n".utf8)), [SSEEvent(data: "b")])
    }

    // MARK: - Split points

    func testRealisticStreamSingleFeed() throws {
        for newline in ["\n", "\r\n", "\r"] {
            XCTAssertEqual(try parse(bytes: realisticStream(newline: newline)), realisticExpected,
                           "newline \(newline.debugDescription)")
        }
    }

    func testRealisticStreamEverySplitPoint() throws {
        for newline in ["\n", "\r\n", "\r"] {
            let bytes = realisticStream(newline: newline)
            for split in 0...bytes.count {
                let events = try parse(chunks: [Array(bytes[..<split]), Array(bytes[split...])])
                if events != realisticExpected {
                    XCTFail("split at \(split) with newline \(newline.debugDescription): \(events)")
                    return
                }
            }
        }
    }

    func testRealisticStreamByteByByte() throws {
        for newline in ["\n", "\r\n", "\r"] {
            let bytes = realisticStream(newline: newline)
            XCTAssertEqual(try parse(chunks: bytes.map { [$0] }), realisticExpected,
                           "newline \(newline.debugDescription)")
        }
    }

    func testRealisticStreamRandomChunkings() throws {
        var rng = SplitMix64(seed: 0x5EED)
        for newline in ["\n", "\r\n", "\r"] {
            let bytes = realisticStream(newline: newline)
            for _ in 0..<300 {
                var chunks: [[UInt8]] = []
                var index = 0
                while index < bytes.count {
                    let length = Int(rng.next() % 40)  // includes empty chunks
                    let end = min(bytes.count, index + length)
                    chunks.append(Array(bytes[index..<end]))
                    index = end
                }
                let events = try parse(chunks: chunks)
                if events != realisticExpected {
                    XCTFail("chunking \(chunks.map(\.count)) with newline \(newline.debugDescription): \(events)")
                    return
                }
            }
        }
    }

    /// Line ends are found eight bytes at a time in a feed of eight bytes or more, one byte at a
    /// time in a shorter one: random streams of lines of every length, with bytes that differ
    /// from CR or LF by one bit, read whole and byte by byte, give the same events.
    func testLineEndsAtEveryPositionOfAWordAreFound() throws {
        var rng = SplitMix64(seed: 0x11E5)
        let alphabet: [UInt8] = Array("data: x".utf8) + [0x0B, 0x0C, 0x09, 0x0E, 0x8A, 0x8D, 0x4A, 0x4D, 0x2A, 0x2D, 0xFF, 0x00]
        for _ in 0..<400 {
            var bytes: [UInt8] = []
            for _ in 0..<Int(rng.next() % 12) {
                bytes += Array("data: ".utf8)
                for _ in 0..<Int(rng.next() % 20) { bytes.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
                bytes += [[0x0A], [0x0D], [0x0D, 0x0A]][Int(rng.next() % 3)]
                if rng.next() % 2 == 0 { bytes += [0x0A] }
            }
            bytes += [0x0A, 0x0A]
            var whole = SSEParser()
            XCTAssertEqual(try whole.feed(bytes), try parse(chunks: bytes.map { [$0] }), "\(bytes)")
        }
    }

    func testEventsAreEmittedAsSoonAsTheirBlankLineArrives() throws {
        var parser = SSEParser()
        XCTAssertEqual(try parser.feed(Array("data: a\n".utf8)), [])
        XCTAssertEqual(try parser.feed(Array("\ndata: b\n".utf8)), [SSEEvent(data: "a")])
        XCTAssertEqual(try parser.feed(Array("\n".utf8)), [SSEEvent(data: "b")])
    }

    func testCallbackFeedEmitsInOrder() throws {
        var parser = SSEParser()
        var seen: [String] = []
        let bytes = Array("data: 1\n\ndata: 2\n\ndata: 3\n\n".utf8)
        try bytes.withUnsafeBytes { buffer in
            try parser.feed(buffer) { seen.append($0.dataText) }
        }
        XCTAssertEqual(seen, ["1", "2", "3"])
    }

    // MARK: - Comments and keep-alives

    func testCommentsAndKeepAlivesAreIgnored() throws {
        XCTAssertEqual(try parse(": keep-alive\n\n:\n\n: ping\r\n\r\n"), [])
        XCTAssertEqual(
            try parse(": hello\ndata: a\n: between data lines\ndata: b\n\n: OPENROUTER PROCESSING\n\n"),
            [SSEEvent(data: "a\nb")])
    }

    func testCommentDoesNotDispatchOrResetEvent() throws {
        XCTAssertEqual(try parse("event: x\n: comment\ndata: a\n\n"), [SSEEvent(type: "x", data: "a")])
    }

    // MARK: - Field parsing

    func testDataWithoutSpace() throws {
        XCTAssertEqual(try parse("data:x\n\n"), [SSEEvent(data: "x")])
    }

    func testOnlyOneLeadingSpaceIsDropped() throws {
        XCTAssertEqual(try parse("data:  x\n\n"), [SSEEvent(data: " x")])
        XCTAssertEqual(try parse("data:   x \n\n"), [SSEEvent(data: "  x ")])
    }

    func testTrailingWhitespaceIsKept() throws {
        XCTAssertEqual(try parse("data: x  \n\n"), [SSEEvent(data: "x  ")])
    }

    func testLeadingTabIsNotDropped() throws {
        XCTAssertEqual(try parse("data:\tx\n\n"), [SSEEvent(data: "\tx")])
    }

    func testValueSplitsAtFirstColonOnly() throws {
        XCTAssertEqual(try parse("data: a:b: c\n\n"), [SSEEvent(data: "a:b: c")])
        XCTAssertEqual(try parse("data::\n\n"), [SSEEvent(data: ":")])
    }

    func testMultiLineData() throws {
        XCTAssertEqual(try parse("data: line1\ndata: line2\ndata:line3\n\n"), [SSEEvent(data: "line1\nline2\nline3")])
    }

    func testDataWithEmptyValueAddsEmptyLine() throws {
        XCTAssertEqual(try parse("data: a\ndata:\ndata: b\n\n"), [SSEEvent(data: "a\n\nb")])
        XCTAssertEqual(try parse("data: a\ndata: \n\n"), [SSEEvent(data: "a\n")])
    }

    func testFieldWithoutColonIsFieldWithEmptyValue() throws {
        XCTAssertEqual(try parse("data\n\n"), [SSEEvent(data: "")])
        XCTAssertEqual(try parse("data\ndata\n\n"), [SSEEvent(data: "\n")])
        XCTAssertEqual(try parse("event\ndata: x\n\n"), [SSEEvent(type: "message", data: "x")])
        XCTAssertEqual(try parse("id\ndata: x\n\n"), [SSEEvent(data: "x", id: "")])
    }

    func testFieldNamesAreCaseSensitive() throws {
        XCTAssertEqual(try parse("Data: x\nDATA: y\ndata: z\n\n"), [SSEEvent(data: "z")])
    }

    func testUnknownFieldsAreIgnored() throws {
        XCTAssertEqual(
            try parse("foo: bar\ndata: a\nbaz\nx-custom: 1\ndate: today\ndat: x\ndatas: y\ndata: b\n\n"),
            [SSEEvent(data: "a\nb")])
    }

    func testRetryIsIgnored() throws {
        XCTAssertEqual(try parse("retry: 1000\n\nretry: x\ndata: a\n\n"), [SSEEvent(data: "a")])
    }

    func testBlankLineWithoutDataDispatchesNothing() throws {
        XCTAssertEqual(try parse("\n\n\n\r\n\r"), [])
        XCTAssertEqual(try parse("event: x\n\nid: 3\n\n"), [])
    }

    func testEventType() throws {
        XCTAssertEqual(
            try parse("event: error\ndata: boom\n\ndata: next\n\n"),
            [SSEEvent(type: "error", data: "boom"), SSEEvent(type: "message", data: "next")])
        // Last `event` line wins.
        XCTAssertEqual(try parse("event: a\nevent: b\ndata: x\n\n"), [SSEEvent(type: "b", data: "x")])
        // Empty event type means "message".
        XCTAssertEqual(try parse("event:\ndata: x\n\n"), [SSEEvent(type: "message", data: "x")])
    }

    func testEventTypeIsResetByBlankLineEvenWithoutData() throws {
        XCTAssertEqual(try parse("event: error\n\ndata: x\n\n"), [SSEEvent(type: "message", data: "x")])
    }

    // MARK: - id

    func testIDBelongsToItsEvent() throws {
        XCTAssertEqual(
            try parse("id: 1\ndata: a\n\ndata: b\n\nid: 2\nid: 3\ndata: c\n\n"),
            [SSEEvent(data: "a", id: "1"), SSEEvent(data: "b", id: nil), SSEEvent(data: "c", id: "3")])
    }

    func testIDWithoutDataIsNotCarriedOver() throws {
        XCTAssertEqual(try parse("id: 1\n\ndata: a\n\n"), [SSEEvent(data: "a", id: nil)])
    }

    func testIDContainingNullIsIgnored() throws {
        XCTAssertEqual(try parse("id: 1\ndata: a\nid: 2\u{0}3\n\n"), [SSEEvent(data: "a", id: "1")])
        XCTAssertEqual(try parse("id: \u{0}\ndata: a\n\n"), [SSEEvent(data: "a", id: nil)])
    }

    func testEmptyIDIsEmptyString() throws {
        XCTAssertEqual(try parse("id:\ndata: a\n\n"), [SSEEvent(data: "a", id: "")])
    }

    func testIDValueKeepsExtraSpaces() throws {
        XCTAssertEqual(try parse("id:  a b \ndata: x\n\n"), [SSEEvent(data: "x", id: " a b ")])
    }

    // MARK: - BOM

    func testLeadingBOMIsSkipped() throws {
        XCTAssertEqual(try parse("\u{FEFF}data: a\n\n"), [SSEEvent(data: "a")])
    }

    func testLeadingBOMSplitAcrossFeedsIsSkipped() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("data: a\n\n".utf8)
        XCTAssertEqual(try parse(chunks: bytes.map { [$0] }), [SSEEvent(data: "a")])
        XCTAssertEqual(try parse(chunks: [[0xEF, 0xBB], Array(bytes[2...])]), [SSEEvent(data: "a")])
        XCTAssertEqual(try parse(chunks: [[0xEF], [], Array(bytes[1...])]), [SSEEvent(data: "a")])
    }

    func testOnlyTheFirstBOMIsSkipped() throws {
        // The second BOM becomes part of the field name, which is then unknown.
        XCTAssertEqual(try parse("\u{FEFF}\u{FEFF}data: a\n\ndata: b\n\n"), [SSEEvent(data: "b")])
        XCTAssertEqual(try parse("data: a\n\n\u{FEFF}data: b\n\n"), [SSEEvent(data: "a")])
    }

    func testPartialBOMIsContent() throws {
        // EF BB followed by "data" is not a BOM: the line's field name is garbage, hence unknown.
        let bytes: [UInt8] = [0xEF, 0xBB] + Array("data: a\n\ndata: b\n\n".utf8)
        XCTAssertEqual(try parse(bytes: bytes), [SSEEvent(data: "b")])
        XCTAssertEqual(try parse(chunks: bytes.map { [$0] }), [SSEEvent(data: "b")])
        // A partial BOM followed directly by a line end is a (garbage) line, not a blank line.
        XCTAssertEqual(try parse(bytes: [0xEF, 0x0A] + Array("data: c\n\n".utf8)), [SSEEvent(data: "c")])
    }

    func testBOMInsideDataIsKept() throws {
        XCTAssertEqual(try parse("data: \u{FEFF}a\n\n"), [SSEEvent(data: "\u{FEFF}a")])
    }

    // MARK: - End of stream

    func testIncompleteEventIsDroppedAtFinish() throws {
        XCTAssertEqual(try parse("data: a\n\ndata: b\n"), [SSEEvent(data: "a")])
        XCTAssertEqual(try parse("data: a\n\ndata: b"), [SSEEvent(data: "a")])
        XCTAssertEqual(try parse("data: a\n\ndata: b\r"), [SSEEvent(data: "a")])
    }

    func testFinishResetsState() throws {
        var parser = SSEParser()
        XCTAssertEqual(try parser.feed(Array("event: x\nid: 1\ndata: partial\ndata: li".utf8)), [])
        parser.finish()
        // Nothing of the previous stream (type, id, data, partial line) leaks into the next one,
        // and a BOM is skipped again at its start.
        XCTAssertEqual(try parser.feed(Array("\u{FEFF}data: b\n\n".utf8)), [SSEEvent(type: "message", data: "b", id: nil)])
    }

    // MARK: - UTF-8

    func testMultiByteUTF8SplitAcrossFeeds() throws {
        let bytes = Array("data: €😀é\n\n".utf8)
        for split in 0...bytes.count {
            XCTAssertEqual(
                try parse(chunks: [Array(bytes[..<split]), Array(bytes[split...])]),
                [SSEEvent(data: "€😀é")], "split \(split)")
        }
    }

    func testInvalidUTF8IsReplacedNotFatal() throws {
        let bytes: [UInt8] = Array("data: a".utf8) + [0xFF, 0xC0, 0x80] + Array("b".utf8) + [0xE2, 0x82]
            + [0x0A, 0x0A]
        let events = try parse(bytes: bytes)
        XCTAssertEqual(events.count, 1)
        XCTAssertTrue(events[0].data.hasPrefix("a\u{FFFD}"))
        XCTAssertTrue(events[0].data.contains("b"))
        XCTAssertTrue(events[0].data.hasSuffix("\u{FFFD}"))
        XCTAssertFalse(events[0].data.contains("\n"))
    }

    func testInvalidUTF8InFieldNamesAndEventType() throws {
        let bytes: [UInt8] = [0xFF] + Array("data: x\nevent: ".utf8) + [0xFE] + Array("\ndata: y\n\n".utf8)
        XCTAssertEqual(try parse(bytes: bytes), [SSEEvent(type: "\u{FFFD}", data: "y")])
    }

    func testArbitraryBytesNeverCrash() throws {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<200 {
            let count = Int(rng.next() % 300)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Biased towards interesting bytes too.
            let interesting: [UInt8] = [0x0A, 0x0D, 0x3A, 0x20, 0x00, 0xEF, 0xBB, 0xBF, 0x64]
            let mixed = bytes.map { rng.next() % 2 == 0 ? interesting[Int($0) % interesting.count] : $0 }
            let whole = try parse(bytes: mixed)
            let split = try parse(chunks: mixed.map { [$0] })
            XCTAssertEqual(whole, split)
        }
    }

    // MARK: - Line length limit

    func testLineAtExactlyTheLimitIsAccepted() throws {
        // "data:12345" is 10 bytes; the terminator does not count.
        XCTAssertEqual(try parse("data:12345\n\n", maxLineBytes: 10), [SSEEvent(data: "12345")])
        XCTAssertEqual(try parse("data:12345\r\n\r\n", maxLineBytes: 10), [SSEEvent(data: "12345")])
        XCTAssertEqual(
            try parse(chunks: Array("data:12345\n\n".utf8).map { [$0] }, maxLineBytes: 10),
            [SSEEvent(data: "12345")])
    }

    func testLineOneByteOverTheLimitThrows() {
        XCTAssertThrowsError(try parse("data:123456\n\n", maxLineBytes: 10)) { error in
            XCTAssertEqual(error as? SSEError, .lineTooLong(limit: 10))
        }
    }

    func testUnterminatedLineOverTheLimitThrowsWithoutWaitingForLineEnd() throws {
        var parser = SSEParser(maxLineBytes: 10)
        XCTAssertEqual(try parser.feed(Array("data:12345".utf8)), [])  // 10 bytes pending: fine
        XCTAssertThrowsError(try parser.feed(Array("6".utf8))) { error in
            XCTAssertEqual(error as? SSEError, .lineTooLong(limit: 10))
        }
        var other = SSEParser(maxLineBytes: 10)
        XCTAssertThrowsError(try other.feed(Array("data:123456".utf8))) { error in
            XCTAssertEqual(error as? SSEError, .lineTooLong(limit: 10))
        }
    }

    func testLimitAppliesToEachLineNotToTheEvent() throws {
        let text = "data:12345\ndata:12345\ndata:12345\n\n"
        XCTAssertEqual(try parse(text, maxLineBytes: 10), [SSEEvent(data: "12345\n12345\n12345")])
    }

    func testLimitAcrossManySmallFeeds() {
        var parser = SSEParser(maxLineBytes: 100)
        var thrownAt: Int?
        for index in 0..<200 {
            do {
                _ = try parser.feed([UInt8(ascii: "x")])
            } catch {
                thrownAt = index
                break
            }
        }
        XCTAssertEqual(thrownAt, 100)  // the 101st byte
    }

    func testEventsBeforeTheLongLineAreDeliveredAndParserIsReset() throws {
        var parser = SSEParser(maxLineBytes: 8)
        var seen: [SSEEvent] = []
        // The overlong line arrives while "x" is buffered: the reset must drop it.
        let bytes = Array("data: a\n\ndata: x\ndata: too long\n\n".utf8)
        XCTAssertThrowsError(
            try bytes.withUnsafeBytes { buffer in try parser.feed(buffer) { seen.append(SSEEvent($0)) } })
        XCTAssertEqual(seen, [SSEEvent(data: "a")])
        XCTAssertEqual(try parser.feed(Array("data: b\n\n".utf8)), [SSEEvent(data: "b")])
    }

    func testDefaultLimitIsFourMiB() throws {
        XCTAssertEqual(SSEParser().maxLineBytes, 4 << 20)
        let big = String(repeating: "x", count: (4 << 20) - 6)
        XCTAssertEqual(try parse("data: " + big + "\n\n").first?.data.count, big.count)
        XCTAssertThrowsError(try parse("data: x" + big + "\n\n"))
    }

    // MARK: - web-platform-tests eventsource/format-*

    func testWPTFormatBOM() throws {
        // format-bom.htm
        XCTAssertEqual(data(try parse("\u{FEFF}data:1\n\n\u{FEFF}data:2\n\ndata:3\n\n")), ["1", "3"])
    }

    func testWPTFormatBOM2() throws {
        // format-bom-2.htm
        XCTAssertEqual(data(try parse("\u{FEFF}\u{FEFF}data:1\n\ndata:2\n\ndata:3\n\n")), ["2", "3"])
    }

    func testWPTFormatComments() throws {
        // format-comments.htm
        let long = String(repeating: "x", count: 2 * 1024)
        let text = "data:1\r:\0\n:\r\ndata:2\n:" + long + "\rdata:3\n:data:fail\r:" + long + "\ndata:4\n\n"
        XCTAssertEqual(try parse(text), [SSEEvent(data: "1\n2\n3\n4")])
    }

    func testWPTFormatDataBeforeFinalEmptyLine() throws {
        // format-data-before-final-empty-line.htm
        XCTAssertEqual(data(try parse("retry:1000\ndata:test1\n\nid:test\ndata:test2")), ["test1"])
    }

    func testWPTFormatFieldData() throws {
        // format-field-data.htm
        XCTAssertEqual(data(try parse("data:\n\ndata\ndata\n\ndata:test\n\n")), ["", "\n", "test"])
    }

    func testWPTFormatFieldEvent() throws {
        // format-field-event.htm
        XCTAssertEqual(
            try parse("event:test\ndata:x\n\ndata:x\n\n"),
            [SSEEvent(type: "test", data: "x"), SSEEvent(type: "message", data: "x")])
    }

    func testWPTFormatFieldEventEmpty() throws {
        // format-field-event-empty.htm
        XCTAssertEqual(try parse("event: \ndata:data\n\n"), [SSEEvent(type: "message", data: "data")])
    }

    func testWPTFormatFieldIDNull() throws {
        // format-field-id-null.htm: an id containing U+0000 is ignored (here: the event has no id).
        XCTAssertEqual(try parse("id:1\u{0}\ndata:x\n\n"), [SSEEvent(data: "x", id: nil)])
        XCTAssertEqual(try parse("id:1\ndata:x\nid:\u{0}1\n\n"), [SSEEvent(data: "x", id: "1")])
    }

    func testWPTFormatFieldParsing() throws {
        // format-field-parsing.htm
        let text = "data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n"
        XCTAssertEqual(data(try parse(text)), ["\0\n 2\n1\n3\n\n4"])
    }

    func testWPTFormatFieldRetryIsNotData() throws {
        // format-field-retry*.htm: retry lines never show up in data.
        XCTAssertEqual(data(try parse("retry:03000\ndata:x\n\nretry:1000x\ndata:y\n\n")), ["x", "y"])
    }

    func testWPTFormatFieldUnknown() throws {
        // format-field-unknown.htm
        let text = "data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n"
        XCTAssertEqual(data(try parse(text)), ["test\n\ntest"])
    }

    func testWPTFormatLeadingSpace() throws {
        // format-leading-space.htm
        XCTAssertEqual(data(try parse("data:\ttest\rdata: \ndata:test\n\n")), ["\ttest\n\ntest"])
    }

    func testWPTFormatNewlines() throws {
        // format-newlines.htm
        XCTAssertEqual(data(try parse("data:test\r\ndata\ndata:test\r\n\r")), ["test\n\ntest"])
    }

    func testWPTFormatNullCharacter() throws {
        // format-null-character.htm
        XCTAssertEqual(data(try parse("data:\0\n\n\n\n")), ["\0"])
    }

    func testWPTFormatUTF8() throws {
        // format-utf-8.htm
        XCTAssertEqual(data(try parse("data:ok→☀\n\n")), ["ok→☀"])
    }
}

/// Small deterministic PRNG so failures are reproducible.
private struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
