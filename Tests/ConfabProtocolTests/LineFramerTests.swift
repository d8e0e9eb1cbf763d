import XCTest

@testable import ConfabProtocol

final class LineFramerTests: XCTestCase {

    /// Feeds the chunks in order and returns every line delivered, plus the failure if any.
    private func run(_ framer: inout LineFramer, _ chunks: [[UInt8]]) -> (lines: [String], failure: LineFramer.Failure?) {
        var lines: [String] = []
        for chunk in chunks {
            do {
                try framer.feed(chunk) { lines.append(String(decoding: $0, as: UTF8.self)) }
            } catch {
                return (lines, error)
            }
        }
        return (lines, nil)
    }

    private func run(max: Int = 1024, _ chunks: [String]) -> (lines: [String], failure: LineFramer.Failure?) {
        var framer = LineFramer(maxLineBytes: max)
        return run(&framer, chunks.map { Array($0.utf8) })
    }

    private let sample = Array("hello\r\n{\"a\":1}\n\n\r\nmid\rcr\nlast line é🎉\n".utf8)
    private let sampleLines = ["hello", "{\"a\":1}", "", "", "mid\rcr", "last line é🎉"]

    func testWholeInputInOneFeed() {
        var framer = LineFramer(maxLineBytes: 1024)
        let result = run(&framer, [sample])
        XCTAssertNil(result.failure)
        XCTAssertEqual(result.lines, sampleLines)
        XCTAssertEqual(framer.bufferedByteCount, 0)
    }

    func testSplitAtEveryByteBoundary() {
        for split in 0...sample.count {
            var framer = LineFramer(maxLineBytes: 1024)
            let result = run(&framer, [Array(sample[..<split]), Array(sample[split...])])
            XCTAssertNil(result.failure, "split at \(split)")
            XCTAssertEqual(result.lines, sampleLines, "split at \(split)")
            XCTAssertEqual(framer.bufferedByteCount, 0, "split at \(split)")
        }
    }

    func testSplitAtEveryPairOfBoundaries() {
        for first in 0...sample.count {
            for second in first...sample.count {
                var framer = LineFramer(maxLineBytes: 1024)
                let chunks = [Array(sample[..<first]), Array(sample[first..<second]), Array(sample[second...])]
                let result = run(&framer, chunks)
                XCTAssertEqual(result.lines, sampleLines, "split at \(first), \(second)")
            }
        }
    }

    func testByteByByte() {
        var framer = LineFramer(maxLineBytes: 1024)
        let result = run(&framer, sample.map { [$0] })
        XCTAssertNil(result.failure)
        XCTAssertEqual(result.lines, sampleLines)
    }

    func testPartialLineIsHeldUntilItsNewline() {
        var framer = LineFramer(maxLineBytes: 1024)
        var result = run(&framer, [Array("one\ntw".utf8)])
        XCTAssertEqual(result.lines, ["one"])
        XCTAssertEqual(framer.bufferedByteCount, 2)
        result = run(&framer, [Array("o".utf8)])
        XCTAssertEqual(result.lines, [])
        XCTAssertEqual(framer.bufferedByteCount, 3)
        result = run(&framer, [Array("\r".utf8), Array("\n".utf8)])
        XCTAssertEqual(result.lines, ["two"], "CR split from its LF is still dropped")
        XCTAssertEqual(framer.bufferedByteCount, 0)
    }

    func testCRLFAndEmptyLines() {
        XCTAssertEqual(run(["\n"]).lines, [""])
        XCTAssertEqual(run(["\r\n"]).lines, [""])
        XCTAssertEqual(run(["\n\n\n"]).lines, ["", "", ""])
        XCTAssertEqual(run(["a\r\nb\r\n"]).lines, ["a", "b"])
        XCTAssertEqual(run(["a\r\r\n"]).lines, ["a\r"], "only the one CR before LF is dropped")
        XCTAssertEqual(run(["\ra\n"]).lines, ["\ra"], "a CR elsewhere is kept")
        XCTAssertEqual(run(["no newline"]).lines, [])
        XCTAssertEqual(run([""]).lines, [])
    }

    func testDeliveredSlicesAreReadableFromTheirStartIndex() throws {
        // A slice's indices need not start at 0; the content must be right either way.
        var framer = LineFramer(maxLineBytes: 64)
        var seen: [[UInt8]] = []
        try framer.feed(Array("abc\ndef\n".utf8)) { slice in seen.append(Array(slice)) }
        try framer.feed(Array("gh".utf8)) { slice in seen.append(Array(slice)) }
        try framer.feed(Array("i\n".utf8)) { slice in seen.append(Array(slice)) }
        XCTAssertEqual(seen, [Array("abc".utf8), Array("def".utf8), Array("ghi".utf8)])
    }

    // MARK: - Limit

    func testLineOfExactlyTheLimitPassesInOneFeed() {
        let result = run(max: 8, ["12345678\n"])
        XCTAssertNil(result.failure)
        XCTAssertEqual(result.lines, ["12345678"])
    }

    func testLineOneOverTheLimitFailsInOneFeed() {
        let result = run(max: 8, ["123456789\n"])
        XCTAssertEqual(result.failure, .lineTooLong(limit: 8))
        XCTAssertEqual(result.lines, [])
    }

    func testLineOfExactlyTheLimitPassesAcrossFeeds() {
        XCTAssertEqual(run(max: 8, ["1234", "5678", "\n"]).lines, ["12345678"])
        XCTAssertNil(run(max: 8, ["1234", "5678", "\n"]).failure)
        XCTAssertEqual(run(max: 8, ["1234", "5678\n"]).lines, ["12345678"])
        XCTAssertEqual(run(max: 8, ["12345678", "\n"]).lines, ["12345678"])
        XCTAssertEqual(run(max: 8, ["1", "2", "3", "4", "5", "6", "7", "8", "\nx\n"]).lines, ["12345678", "x"])
    }

    func testLineOneOverTheLimitFailsAcrossFeeds() {
        XCTAssertEqual(run(max: 8, ["1234", "5678", "9\n"]).failure, .lineTooLong(limit: 8))
        XCTAssertEqual(run(max: 8, ["1234", "56789"]).failure, .lineTooLong(limit: 8))
        XCTAssertEqual(run(max: 8, ["12345678", "9"]).failure, .lineTooLong(limit: 8))
        XCTAssertEqual(run(max: 8, ["1", "2", "3", "4", "5", "6", "7", "8", "9"]).failure, .lineTooLong(limit: 8))
        XCTAssertEqual(run(max: 8, ["1234", "56789\nok\n"]).failure, .lineTooLong(limit: 8))
    }

    func testOverlongLineWithoutNewlineFailsAsSoonAsItArrives() {
        // Waiting for a newline would mean buffering without bound.
        var framer = LineFramer(maxLineBytes: 8)
        let result = run(&framer, [Array("123456789".utf8)])
        XCTAssertEqual(result.failure, .lineTooLong(limit: 8))
        XCTAssertLessThanOrEqual(framer.bufferedByteCount, 8)
    }

    func testExactLimitWithoutNewlineIsBuffered() {
        var framer = LineFramer(maxLineBytes: 8)
        let result = run(&framer, [Array("12345678".utf8)])
        XCTAssertNil(result.failure)
        XCTAssertEqual(framer.bufferedByteCount, 8)
    }

    func testLinesBeforeTheLongOneAreDelivered() {
        let result = run(max: 8, ["ok\nfine\n123456789\nafter\n"])
        XCTAssertEqual(result.lines, ["ok", "fine"])
        XCTAssertEqual(result.failure, .lineTooLong(limit: 8))
    }

    func testFramerStaysFailed() {
        for chunks in [["123456789\n"], ["1234", "56789"], ["12345", "6789\n"]] {
            var framer = LineFramer(maxLineBytes: 8)
            let first = run(&framer, chunks.map { Array($0.utf8) })
            XCTAssertEqual(first.failure, .lineTooLong(limit: 8), "\(chunks)")
            for _ in 0..<3 {
                let again = run(&framer, [Array("ok\n".utf8)])
                XCTAssertEqual(again.failure, .lineTooLong(limit: 8), "still failed after \(chunks)")
                XCTAssertEqual(again.lines, [], "nothing delivered after failure")
            }
            let empty = run(&framer, [[]])
            XCTAssertEqual(empty.failure, .lineTooLong(limit: 8))
            XCTAssertEqual(framer.bufferedByteCount, 0, "a failed framer holds nothing")
        }
    }

    func testLimitAppliesToEveryLineNotTheWholeFeed() {
        // Many short lines in one large feed are fine.
        let text = String(repeating: "1234567\n", count: 1000)
        let result = run(max: 8, [text])
        XCTAssertNil(result.failure)
        XCTAssertEqual(result.lines.count, 1000)
    }

    func testUnsafeBufferFeedMatchesArrayFeed() throws {
        var framer = LineFramer(maxLineBytes: 64)
        var lines: [String] = []
        let bytes = Array("a\nbc".utf8)
        try bytes.withUnsafeBytes { raw in
            try framer.feed(raw) { lines.append(String(decoding: $0, as: UTF8.self)) }
        }
        try Array("d\n".utf8).withUnsafeBytes { raw in
            try framer.feed(raw) { lines.append(String(decoding: $0, as: UTF8.self)) }
        }
        XCTAssertEqual(lines, ["a", "bcd"])
    }
}
