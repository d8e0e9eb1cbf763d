import Foundation
import XCTest

@testable import ConfabProtocol

/// Inputs that once crashed a fuzz harness (fuzz/regressions/protocol/, layout in fuzz/README.md),
/// replayed along the harness's path: LineFramer fed in the input's chunk sizes, then
/// JSON.parse with its round trip and RPC.parse on every line. `scripts/fuzz.sh` replays the
/// same files through the libFuzzer binary.
final class FuzzRegressionTests: XCTestCase {

    private static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz/regressions/protocol")

    /// Byte 0: bit 7 picks a 64-byte line limit (else 4096), bits 0-2 how many chunk sizes
    /// follow; the rest is the stream, fed in chunks of those sizes (cycled; none: 1 byte).
    private func replay(_ input: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        guard let header = input.first else { return }
        let limit = header & 0x80 != 0 ? 64 : 4096
        let count = min(Int(header & 7), input.count - 1)
        var sizes = input[1..<(1 + count)].map(Int.init)
        if sizes.allSatisfy({ $0 == 0 }) { sizes = [1] }
        let payload = input[(1 + count)...]

        var framer = LineFramer(maxLineBytes: limit)
        var lines: [[UInt8]] = []
        var start = payload.startIndex, index = 0
        while start < payload.endIndex {
            let end = min(start + sizes[index % sizes.count], payload.endIndex)
            index += 1
            do {
                try framer.feed(Array(payload[start..<end])) { lines.append(Array($0)) }
            } catch {
                break
            }
            XCTAssertLessThanOrEqual(framer.bufferedByteCount, limit, file: file, line: line)
            start = end
        }
        for bytes in lines {
            if let value = try? JSON.parse(bytes) {
                XCTAssertEqual(try? JSON.parse(value.bytes), value, file: file, line: line)
            }
            if case .success(.request(let id, let method, let params)) = RPC.parse(bytes) {
                let again = RPC.request(id: id, method: method, params: params)
                XCTAssertEqual(RPC.parse(again.dropLast()), .success(.request(id: id, method: method, params: params)),
                               file: file, line: line)
            }
        }
    }

    func testSavedInputsReplayCleanly() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).sorted()
        XCTAssertFalse(names.isEmpty, "no inputs in \(Self.directory.path)")
        for name in names {
            let input = try Data(contentsOf: Self.directory.appendingPathComponent(name))
            replay(Array(input))
        }
    }

    // The crash behind the saved inputs: Foundation's JSONScanner trapped (SIGILL) instead of
    // throwing when the `[` that opens level 513 was the last byte of its input, so a 514-byte
    // line killed confabd. JSONScanner counts depth as it reads and refuses level 513.

    func testBracketOneLevelTooDeepAtTheEndIsAParseError() {
        XCTAssertThrowsError(try JSON.parse(String(repeating: "[", count: 513))) { error in
            XCTAssertTrue((error as? JSONParseError)?.description.contains("nested deeper than 512") ?? false, "\(error)")
        }
        let line = #"{"jsonrpc":"2.0","id":1,"method":"status","params":"# + String(repeating: "[", count: 512)
        guard case .failure(let failure) = RPC.parse(Array(line.utf8)) else { return XCTFail("parsed") }
        XCTAssertEqual(failure.id, .null)
        XCTAssertEqual(failure.error.code, RPCError.parseError)
    }

    func testNestingUpToTheLimitStillParses() throws {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        XCTAssertNoThrow(try JSON.parse(deepest))
        XCTAssertThrowsError(try JSON.parse("[" + deepest + "]"))
        XCTAssertThrowsError(try JSON.parse("{\"a\":" + deepest + "}")) { error in
            XCTAssertTrue("\(error)".contains("nested deeper than 512"), "\(error)")
        }
    }

    func testBracketsInsideStringsDoNotCount() throws {
        let text = "[\"" + String(repeating: "[", count: 600) + "\\\"" + String(repeating: "{", count: 600) + "\"]"
        XCTAssertEqual(try JSON.parse(text), .array([.string(String(repeating: "[", count: 600) + "\"" + String(repeating: "{", count: 600))]))
    }
}
