import Foundation
import XCTest

import ConfabProtocol
@testable import LogStore

/// A message record read straight from its bytes (`MessageRecordBody`, `Message(scanning:)`)
/// must be exactly the record its tree gives, or nil (then the tree is read); a message or a
/// history page written without a tree (`Message.write`, `HistoryResult.write`) must be
/// exactly the bytes its tree writes.
final class MessageBytesTests: XCTestCase {
    private static var goldenLines: [String] {
        let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/golden")
        let files = FileManager.default.enumerator(atPath: golden.path)?.compactMap { $0 as? String } ?? []
        return files.filter { $0.contains("/conversations/") && $0.hasSuffix(".jsonl") }.sorted().flatMap { file in
            ((try? String(contentsOfFile: golden.appendingPathComponent(file).path, encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }
    }

    private func body(_ line: String) -> LogRecord? {
        Array(line.utf8).withUnsafeBufferPointer { MessageRecordBody.read($0) }
    }

    private func tree(_ line: String) -> LogRecord? {
        (try? JSON.parse(line)).flatMap(LogRecord.init(json:))
    }

    private func message(of record: LogRecord?) -> Message? {
        switch record {
        case .message(let message)?, .replyStarted(let message)?, .replyFinished(let message)?: message
        default: nil
        }
    }

    private func written(_ message: Message) -> [UInt8] {
        var out: [UInt8] = []
        message.write(into: &out)
        return out
    }

    /// Every record of every golden log: a message record reads from its bytes as its tree
    /// does, and any other record is left to the tree.
    func testEveryGoldenRecordReadsFromItsBytesAsItsTreeDoes() throws {
        let lines = Self.goldenLines
        XCTAssertGreaterThan(lines.count, 500, "the golden logs were found")
        var messages = 0
        for line in lines {
            let expected = tree(line)
            if message(of: expected) != nil {
                messages += 1
                XCTAssertEqual(body(line), expected, line)
            } else {
                XCTAssertNil(body(line), line)
            }
        }
        XCTAssertGreaterThan(messages, 300)
    }

    /// Every golden message, and each with a field it lacks set, writes the bytes of its tree.
    func testEveryGoldenMessageWritesTheBytesOfItsTree() throws {
        var count = 0
        for line in Self.goldenLines {
            guard let found = message(of: tree(line)) else { continue }
            var variants = [found]
            var superseded = found
            superseded.supersededBy = "m900.2"
            variants.append(superseded)
            if var tool = found.tool {
                tool.truncated = true
                tool.approval = .denied
                tool.requestedBy = Author(uid: 7, login: "bo", name: "Bo", clientID: "c9")
                tool.decidedBy = Author(uid: 0, login: "root", name: "Root", clientID: "c1")
                var changed = found
                changed.tool = tool
                variants.append(changed)
            }
            for message in variants {
                XCTAssertEqual(written(message), message.json.bytes, line)
                count += 1
            }
        }
        XCTAssertGreaterThan(count, 600)
    }

    /// The writer follows `MessageKey`'s order, which must be the order `JSON.write` sorts keys into.
    func testMessageKeysAreInTheOrderTheWriterSortsThem() {
        let names = MessageKey.allCases.map(\.name)
        XCTAssertEqual(names, names.sorted())
        XCTAssertEqual(Set(names).count, names.count)
    }

    func testEveryFieldAtOnceWritesTheBytesOfItsTree() throws {
        let author = Author(uid: 1000, login: "ana", name: "Ana \"A\" é\u{1B}[2J", clientID: "c7", link: "l1")
        var message = Message(
            id: "m12.3", conversation: "k3v9q2m8x7ad", role: .tool, content: "line\none \u{202E}\t\"quoted\" \\ é 🙂",
            status: .failed, created: Timestamp(milliseconds: 1_795_320_930_123), author: author, model: "gpt",
            finishReason: "length", usage: Usage(promptTokens: 9, completionTokens: 3, totalTokens: 12),
            error: MessageError(code: .upstreamHTTP, message: "bad gateway", status: 502), supersededBy: "m14",
            params: SamplingParameters(temperature: 0.25, maxTokens: 64), quickReplies: ["yes", "no"],
            context: ContextInfo(messages: 4, dropped: 2, estimatedTokens: 900, summarised: "m1…m3"),
            toolCalls: [ToolCall(id: "call_1", name: "echo", arguments: "{\"a\":1}")],
            tool: ToolResult(callID: "call_1", name: "echo", httpStatus: 200, durationMilliseconds: 15, approval: .approved,
                             truncated: true, requestedBy: author, decidedBy: author),
            attachments: [Attachment(name: "a.png", type: .png, size: 3, sha256: String(repeating: "a", count: 64))])
        message.otherAttachments = [["sha256": .string(String(repeating: "b", count: 64)), "type": "hologram", "name": "x"]]
        message.reasoning = Reasoning(text: "thinking", started: Timestamp(milliseconds: 5), ended: Timestamp(milliseconds: 9), redactedBlocks: 1)
        XCTAssertEqual(written(message), message.json.bytes)
        XCTAssertEqual(Message(json: try JSON.parse(written(message))), message)
        var bare = message
        bare.params = SamplingParameters()
        bare.toolCalls = []
        bare.attachments = []
        bare.otherAttachments = nil
        bare.quickReplies = []
        bare.tool = nil
        XCTAssertEqual(written(bare), bare.json.bytes)

        for compaction in [nil, Compaction(first: "m1", last: "m3", summary: "s", model: "gpt")] {
            for more in [false, true] {
                for messages in [[], [message], [message, bare]] {
                    let page = HistoryResult(messages: messages, more: more, compaction: compaction)
                    var out: [UInt8] = []
                    page.write(into: &out)
                    XCTAssertEqual(out, page.json.bytes)
                }
            }
        }
        let line = RPC.response(id: .int(7), capacity: 0) { HistoryResult(messages: [bare], more: true).write(into: &$0) }
        XCTAssertEqual(line, RPC.response(id: .int(7), result: HistoryResult(messages: [bare], more: true).json))
    }

    /// Lines a tree reads one way and a careless scanner another: repeated keys (the tree keeps
    /// the first), escaped keys, values of the wrong kind, keys nobody knows, versions from the
    /// future, records of other types and text that is not JSON.
    func testOddRecordsReadAsTheirTreeOrAreLeftToIt() {
        let head = #""conversation":"k3v9q2m8x7ad","created":"2026-11-25T20:45:34.850Z","id":"m1","role":"assistant","status":"complete""#
        let same = [
            #"{"type":"message","v":1,"message":{"content":"a","content":"b",\#(head)}}"#,
            #"{"type":"message","v":1,"message":{"cont\u0065nt":"esc",\#(head)}}"#,
            #"{"type":"message","v":1,"message":{"content":"a","model":7,"usage":"many","tool_calls":{},\#(head)}}"#,
            #"{"type":"message","v":1,"message":{"content":"a","novel":{"deep":[[[{"x":null}]]]},\#(head)},"also":[1,2]}"#,
            #"{"type":"reply.finished","v":1,"replay":{"api":"anthropic","provider":"p","model":"m","items":[{"type":"thinking"}]},"message":{"content":"a",\#(head)}}"#,
            #"{"type":"reply.started","v":0,"message":{"content":"",\#(head),"superseded_by":"m2"}}"#,
            #"{"type":"message","v":1,"message":{"content":"a","superseded_by":"x9",\#(head)}}"#,
            #" { "type" : "message" , "v" : 1.0 , "message" : { "content" : "spaced" , \#(head) } } "#,
        ]
        for line in same {
            XCTAssertNotNil(tree(line), line)
            XCTAssertEqual(body(line), tree(line), line)
        }
        let treeOnly = [
            #"{"type":"message","type":"title","v":1,"message":{"content":"a",\#(head)}}"#,
            #"{"type":"message","v":1,"message":{"content":"a",\#(head)},"message":{}}"#,
            #"{"type":"reply.text","v":1,"message":"m1","content":"a"}"#,
        ]
        for line in treeOnly {
            XCTAssertNotNil(tree(line), line)
            XCTAssertNil(body(line), line)
        }
        let neither = [
            #"{"type":"message","v":2,"message":{"content":"a",\#(head)}}"#,
            #"{"type":"message","v":"1","message":{"content":"a",\#(head)}}"#,
            #"{"type":7,"v":1,"message":{"content":"a",\#(head)}}"#,
            #"{"type":"message","v":1,"message":"m1"}"#,
            #"{"type":"message","v":1,"message":{"content":1,\#(head)}}"#,
            #"{"type":"message","v":1,"message":{\#(head)}}"#,
            #"{"type":"message","v":1,"message":{"content":"a",\#(head)}"#,
            #"{"type":"message","v":1,"message":{"content":"a\#u{1}",\#(head)}}"#,
            #"{"type":"message","v":1,"message":{"content":"a",\#(head)}} x"#,
        ]
        for line in neither {
            XCTAssertNil(tree(line), line)
            XCTAssertNil(body(line), line)
        }
    }
}
