import ConfabProtocol
import XCTest

@testable import Upstream

private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2]
private let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 9]
private let pngBase64 = "iVBORw0KGgoBAg=="
private let jpegBase64 = "/9j/4Ak="

private func image(_ name: String, _ type: AttachmentType, _ bytes: [UInt8]) -> ChatAttachment {
    ChatAttachment(name: name, type: type, size: bytes.count, sha256: String(repeating: "a", count: 64), content: .image(encoding: bytes))
}

private func textFile(_ name: String, _ text: String) -> ChatAttachment {
    ChatAttachment(name: name, type: .text, size: text.utf8.count, sha256: String(repeating: "b", count: 64), content: .text(text))
}

private func string(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// Images in two turns, one of them with a text file too, and a turn that is only an image.
private let turns = [
    ChatMessage(role: .system, content: "Be brief."),
    ChatMessage(role: .user, content: "What is this?", attachments: [image("a.png", .png, png), textFile("notes.txt", "one\ntwo\n")]),
    ChatMessage(role: .assistant, content: "A square."),
    ChatMessage(role: .user, content: "", attachments: [image("b.jpg", .jpeg, jpeg)]),
]

final class AttachmentBodyTests: XCTestCase {
    func testBase64InCIsTheStandardForm() {
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            let out = Array("x".utf8) + Base64.bytes(of: bytes)
            XCTAssertEqual(string(out), "x" + Base64.encode(bytes), "\(count) bytes")
            XCTAssertEqual(Base64.decode(String(string(out).dropFirst())), bytes)
        }
    }

    func testATextFileIsANamedFenceLongerThanAnyBacktickRunInIt() {
        XCTAssertEqual(ChatAttachment.fenced("plain", name: "a.txt"), "a.txt:\n```\nplain\n```")
        XCTAssertEqual(ChatAttachment.fenced("ends\n", name: "a.txt"), "a.txt:\n```\nends\n```")
        XCTAssertEqual(ChatAttachment.fenced("", name: "empty"), "empty:\n```\n```")
        XCTAssertEqual(ChatAttachment.fenced("x ``` y", name: "md"), "md:\n````\nx ``` y\n````")
        XCTAssertEqual(ChatAttachment.fenced("`a` ``````b", name: "md"), "md:\n```````\n`a` ``````b\n```````")
    }

    func testChatCompletionsSendPartsWithDataURLsOnlyForTurnsWithImages() throws {
        let body = string(ChatRequest(model: "m", messages: turns).jsonBody())
        XCTAssertEqual(body, #"{"model":"m","messages":[{"role":"system","content":"Be brief."},"#
            + #"{"role":"user","content":[{"type":"text","text":"What is this?\n\nnotes.txt:\n```\none\ntwo\n```"},"#
            + #"{"type":"image_url","image_url":{"url":"data:image/png;base64,"# + pngBase64 + #""}}]},"#
            + #"{"role":"assistant","content":"A square."},"#
            + #"{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,"# + jpegBase64 + #""}}]}],"#
            + #""stream":true,"stream_options":{"include_usage":true}}"#)
        XCTAssertNoThrow(try JSON.parse(body))
    }

    func testChatCompletionsKeepATurnWithOnlyTextFilesAString() {
        let withFence = ChatMessage(role: .user, content: "Review", attachments: [textFile("README.md", "Run `make`:\n```sh\nmake\n```\n")])
        let body = string(ChatRequest(model: "m", messages: [withFence]).jsonBody())
        XCTAssertEqual(body, #"{"model":"m","messages":[{"role":"user","content":"Review\n\nREADME.md:\n````\nRun `make`:\n```sh\nmake\n```\n````"}],"#
            + #""stream":true,"stream_options":{"include_usage":true}}"#)
    }

    func testSeveralImagesInOneTurnGoInTheOrderAttached() {
        let turn = ChatMessage(role: .user, content: "Compare", attachments: [image("b.jpg", .jpeg, jpeg), image("a.png", .png, png)])
        let body = string(ChatRequest(model: "m", messages: [turn]).jsonBody())
        XCTAssertTrue(body.contains(#""content":[{"type":"text","text":"Compare"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,"#
            + jpegBase64 + #""}},{"type":"image_url","image_url":{"url":"data:image/png;base64,"# + pngBase64 + #""}}]"#), body)
    }

    func testAnthropicSendsImageBlocksBeforeTheTurnsText() {
        let body = string(AnthropicMessagesAPI().body(for: ChatRequest(model: "claude", messages: turns)))
        XCTAssertEqual(body, #"{"model":"claude","max_tokens":1024,"system":"Be brief.","messages":["#
            + #"{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":""# + pngBase64 + #""}},"#
            + #"{"text":"What is this?\n\nnotes.txt:\n```\none\ntwo\n```","type":"text"}]},"#
            + #"{"role":"assistant","content":"A square."},"#
            + #"{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":""# + jpegBase64 + #""}}]}],"#
            + #""stream":true}"#)
    }

    func testAnthropicToolResultsGoBeforeTheImagesOfTheTurnTheyMeet() {
        let call = ToolCall(id: "t1", name: "look", arguments: "{}")
        let messages = [
            ChatMessage(role: .user, content: "go"),
            ChatMessage(role: .assistant, content: "", toolCalls: [call]),
            ChatMessage(role: .user, content: "and this", attachments: [image("a.png", .png, png)]),
            ChatMessage(role: .tool, content: "done", toolCallID: "t1", toolName: "look"),
        ]
        let (_, sent) = AnthropicMessagesAPI().turns(of: ChatRequest(model: "claude", messages: messages))
        XCTAssertEqual(sent.last?.blocks, [.toolResult(id: "t1", content: "done", isError: false),
                                           .image(mediaType: "image/png", base64: Array(pngBase64.utf8)), .text("and this")])
    }

    func testCompletionsInlineTextFilesAndNameImagesInsteadOfSendingThem() {
        let api = OpenAICompletionsAPI()
        let transcript = api.transcript(of: ChatRequest(model: "m", messages: turns))
        XCTAssertEqual(transcript, "Be brief.\n\n"
            + "Human: What is this?\n\n[image a.png (image/png, 10 B) not sent: this model takes no images]\n\nnotes.txt:\n```\none\ntwo\n```\n"
            + "AI: A square.\n"
            + "Human: [image b.jpg (image/jpeg, 5 B) not sent: this model takes no images]\n"
            + "AI:")
        XCTAssertFalse(string(api.body(for: ChatRequest(model: "m", messages: turns))).contains(pngBase64))
    }

    func testLinesStandingForFilesAreSentAsText() {
        let missing = ChatAttachment(name: "gone.png", type: .png, size: 3000, sha256: String(repeating: "c", count: 64),
                                     content: .line(ChatAttachment.unreadableLine(name: "gone.png", type: .png)))
        let turn = ChatMessage(role: .user, content: "see", attachments: [missing])
        XCTAssertEqual(string(ChatRequest(model: "m", messages: [turn]).jsonBody()),
                       #"{"model":"m","messages":[{"role":"user","content":"see\n\n[attached file gone.png (image/png) not sent: its stored copy could not be read]"}],"#
                       + #""stream":true,"stream_options":{"include_usage":true}}"#)
        let anthropic = string(AnthropicMessagesAPI().body(for: ChatRequest(model: "c", messages: [turn])))
        XCTAssertTrue(anthropic.contains(#""content":"see\n\n[attached file gone.png"#), anthropic)
    }

    func testSizesAsPeopleReadThem() {
        XCTAssertEqual(ChatAttachment.describe(size: 120), "120 B")
        XCTAssertEqual(ChatAttachment.describe(size: 212 * 1024 + 100), "212 KiB")
        XCTAssertEqual(ChatAttachment.describe(size: 3 << 20), "3 MiB")
        XCTAssertEqual(ChatAttachment.describe(size: 3 << 19), "1.5 MiB")
    }

    /// A body of several megabytes of images is written in one pass: this fails only if writing
    /// grows quadratic (seconds per body), never on a slow machine's linear time.
    func testABodyWithLargeImagesIsWrittenWhole() throws {
        let large = [UInt8](repeating: 0xAB, count: 5 << 20)
        let turn = ChatMessage(role: .user, content: "big", attachments: [image("a.png", .png, large), image("b.png", .png, large)])
        let body = ChatRequest(model: "m", messages: [turn]).jsonBody()
        let encoded = (large.count + 2) / 3 * 4
        let head = Array(#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"big"},{"type":"image_url","image_url":{"url":"data:image/png;base64,"#.utf8)
        XCTAssertEqual(Array(body.prefix(head.count)), head)
        XCTAssertEqual(body.count, head.count + encoded + #""}},{"type":"image_url","image_url":{"url":"data:image/png;base64,"#.utf8.count + encoded
            + #""}}]}],"stream":true,"stream_options":{"include_usage":true}}"#.utf8.count)
        XCTAssertEqual(Base64.decode(String(decoding: body[head.count..<head.count + encoded], as: UTF8.self)), large)
    }
}
