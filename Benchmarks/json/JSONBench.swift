// Time and allocations per operation of the JSON work on confabd's hot path: decoding one
// SSE chunk of a streamed reply, encoding one message.delta frame, parsing one protocol line
// and one log record. Built and run by Benchmarks/json/run.sh (release flags, allocator calls
// counted by malloccount.c through LD_PRELOAD).

import ConfabProtocol
import SSE
import Upstream

#if canImport(Glibc)
import Glibc
#endif

typealias CountFunction = @convention(c) () -> Int
/// The preloaded counter's total of allocator calls (nil: not preloaded). `nil` is RTLD_DEFAULT.
let mallocCount: CountFunction? = dlsym(nil, "confab_malloc_count").map { unsafeBitCast($0, to: CountFunction.self) }

func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

@inline(never) func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

/// Runs `body` `iterations` times after a warm-up; prints ns and allocator calls per call.
func measure(_ name: String, iterations: Int, _ body: () -> Void) {
    if let only, !name.contains(only) { return }
    for _ in 0..<min(iterations, 10_000) { body() }
    var best = UInt64.max
    var allocations = 0
    for _ in 0..<5 {
        let mallocsBefore = mallocCount?() ?? 0
        let start = nanoseconds()
        for _ in 0..<iterations { body() }
        let elapsed = nanoseconds() - start
        allocations = (mallocCount?() ?? 0) - mallocsBefore
        best = min(best, elapsed)
    }
    let perCall = Double(best) / Double(iterations)
    let perCallMallocs = mallocCount == nil ? "n/a" : String(Double(allocations) / Double(iterations))
    print("\(name.padding(30)) \(String(Int(perCall.rounded())).leftPadding(7)) ns/op  \(perCallMallocs.leftPadding(6)) mallocs/op")
}

extension String {
    func padding(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
    func leftPadding(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}

let iterations = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 200_000
/// Only the measurements whose name holds this (for a profile of one of them).
let only = CommandLine.arguments.dropFirst(2).first

// What an OpenAI-compatible server sends for one token.
let chunk = SSEEvent(data: #"{"id":"chatcmpl-AbC123xyz","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}"#)
let longChunk = SSEEvent(data: #"{"id":"chatcmpl-AbC123xyz","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":"a longer piece of text, \"quoted\" and caf\u00e9 \ud83c\udf89"},"logprobs":null,"finish_reason":null}]}"#)
let usageChunk = SSEEvent(data: #"{"id":"chatcmpl-AbC123xyz","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":300,"total_tokens":312}}"#)

var decoder = ChatStreamDecoder()
measure("SSE chunk decode (one word)", iterations: iterations) { blackHole(try! decoder.decode(chunk)) }
measure("SSE chunk decode (escapes)", iterations: iterations) { blackHole(try! decoder.decode(longChunk)) }
measure("SSE chunk decode (usage)", iterations: iterations) { blackHole(try! decoder.decode(usageChunk)) }

let conversation = "k3v9q2m8x7ad", messageID = "m42", word = " word"
measure("delta frame via JSON tree", iterations: iterations) {
    blackHole(RPC.notification(method: "message.delta", params: [
        "conversation": .string(conversation), "message": .string(messageID), "content": .string(word)]))
}
#if DELTA_FRAME
var frame: [UInt8] = []
frame.reserveCapacity(256)
measure("delta frame direct (reused)", iterations: iterations) {
    frame.removeAll(keepingCapacity: true)
    RPC.writeDelta(conversation: conversation, message: messageID, content: word, into: &frame)
    blackHole(frame.count)
}
measure("delta frame direct (new)", iterations: iterations) {
    blackHole(RPC.deltaNotification(conversation: conversation, message: messageID, content: word))
}
#endif

let requestLine = Array(#"{"jsonrpc":"2.0","id":17,"method":"message.send","params":{"conversation":"k3v9q2m8x7ad","content":"write a commit message for this change, please"}}"#.utf8)
measure("protocol line parse", iterations: iterations) { blackHole(RPC.parse(requestLine)) }

let logLine = Array(#"{"at":"2026-11-22T04:15:30.123Z","message":{"author":{"client_id":"c7","login":"ada","name":"Ada L","uid":1000},"content":"How do I reverse a list in Swift? I tried a few things and none of them worked.","conversation":"k3v9q2m8x7ad","created":"2026-11-22T04:15:30.120Z","id":"m41","role":"user","status":"complete"},"type":"message","v":1}"#.utf8)
measure("log record parse", iterations: iterations) {
    let json = try! JSON.parse(logLine)
    blackHole(Message(json: json["message"]!))
}
