import XCTest

import Foundation
import SSE
@testable import Upstream

/// Inputs that once crashed the SSE fuzz harness (fuzz/regressions/sse/, layout in
/// fuzz/README.md), replayed along the harness's path: SSEParser fed in the input's chunk
/// sizes, every event through ChatStreamDecoder, the whole stream through
/// upstreamErrorMessage. `scripts/fuzz.sh` replays the same files through the libFuzzer binary.
final class FuzzRegressionTests: XCTestCase {

    private static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz/regressions/sse")

    /// Byte 0: bit 7 picks a 64-byte line limit (else 4096), bits 0-2 how many chunk sizes
    /// follow; the rest is the stream, fed in chunks of those sizes (cycled; none: 1 byte).
    private func replay(_ input: [UInt8]) {
        guard let header = input.first else { return }
        let limit = header & 0x80 != 0 ? 64 : 4096
        let count = min(Int(header & 7), input.count - 1)
        var sizes = input[1..<(1 + count)].map(Int.init)
        if sizes.allSatisfy({ $0 == 0 }) { sizes = [1] }
        let payload = Array(input[(1 + count)...])

        var parser = SSEParser(maxLineBytes: limit)
        var events: [SSEEvent] = []
        var start = 0, index = 0
        while start < payload.count {
            let end = min(start + sizes[index % sizes.count], payload.count)
            index += 1
            guard let more = try? parser.feed(Array(payload[start..<end])) else { break }
            events += more
            start = end
        }
        var decoder = ChatStreamDecoder()
        for event in events { _ = try? decoder.decode(event) }
        XCTAssertFalse(upstreamErrorMessage(status: 500, body: payload).message.isEmpty)
    }

    func testSavedInputsReplayCleanly() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).sorted()
        XCTAssertFalse(names.isEmpty, "no inputs in \(Self.directory.path)")
        for name in names {
            replay(Array(try Data(contentsOf: Self.directory.appendingPathComponent(name))))
        }
    }

    // Foundation's JSONDecoder traps (SIGILL) instead of throwing when the `[` that opens
    // level 513 is the last byte of its input; an upstream could crash confabd with one chunk
    // or one error body. Such payloads are now refused before the decoder sees them.

    private let overDeep = #"{"a":"# + String(repeating: "[", count: 512)

    func testOverDeepChunkIsMalformed() {
        var decoder = ChatStreamDecoder()
        XCTAssertThrowsError(try decoder.decode(SSEEvent(data: overDeep))) { error in
            guard case .malformedChunk(let excerpt)? = error as? ChatStreamError else { return XCTFail("\(error)") }
            XCTAssertTrue(excerpt.hasPrefix(#"{"a":[[["#))
        }
    }

    func testOverDeepErrorEventGivesTheRawText() throws {
        var decoder = ChatStreamDecoder()
        let events = try decoder.decode(SSEEvent(type: "error", data: overDeep))
        guard case .error(let info)? = events.first, events.count == 1 else { return XCTFail("\(events)") }
        XCTAssertTrue(info.message.hasPrefix(#"{"a":[[["#))
    }

    func testOverDeepErrorBodyGivesTheRawText() {
        let info = upstreamErrorMessage(status: 502, body: Array(overDeep.utf8))
        XCTAssertTrue(info.message.hasPrefix(#"{"a":[[["#))
        XCTAssertNil(info.type)
    }
}
