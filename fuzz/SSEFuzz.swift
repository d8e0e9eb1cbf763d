// libFuzzer harness for the bytes an upstream sends to confabd: SSEParser -> ChatStreamDecoder,
// plus upstreamErrorMessage for non-2xx bodies. Compiled together with
// the stream's files (ChatStream.swift, ChatStreamDecoder.swift, ChatStreamShapes.swift,
// ToolCallAssembler.swift, UpstreamErrorBody.swift; same module, so no import of Upstream), with
// the SSE module (Sources/SSE) built first as a library, by scripts/fuzz.sh:
//
//   swiftc -O -sanitize=fuzzer,address -parse-as-library -swift-version 6 -I .build-fuzz -L .build-fuzz -lSSE \
//       Sources/Upstream/ChatStream*.swift Sources/Upstream/ToolCallAssembler.swift \
//       Sources/Upstream/UpstreamErrorBody.swift fuzz/FuzzInput.swift fuzz/SSEFuzz.swift \
//       -o .build-fuzz/sse-fuzz
//
// Input layout: as in ProtocolFuzz.swift (`Chunking`, fuzz/FuzzInput.swift).
//
// Invariants checked (a violation is a crash, which libFuzzer saves):
//  - feeding the stream in chunks gives the same events, and the same lineTooLong failure,
//    as feeding it in one piece;
//  - after finish() the parser is as new: the same bytes give the same events again;
//  - events: type never empty, id never holds NUL;
//  - every event decodes without crashing; decoded content / finish reason / error message are
//    never empty, error messages are at most 1000 characters, malformed-chunk excerpts at most 200;
//  - upstreamErrorMessage on the raw bytes gives a non-empty message of at most 1000 characters.

import SSE

/// Feeds `chunks` in order; returns the events and whether the parser threw lineTooLong.
func events(_ parser: inout SSEParser, _ chunks: [ArraySlice<UInt8>]) -> (events: [SSEEvent], failed: Bool) {
    var out: [SSEEvent] = []
    for chunk in chunks {
        do {
            try Array(chunk).withUnsafeBytes { try parser.feed($0) { out.append(SSEEvent($0)) } }
        } catch {
            check(error as? SSEError == .lineTooLong(limit: parser.maxLineBytes), "wrong error \(error)")
            return (out, true)
        }
    }
    parser.finish()
    return (out, false)
}

func checkDecoded(_ event: SSEEvent, _ decoder: inout ChatStreamDecoder) {
    check(!event.type.isEmpty, "event with empty type")
    check(!(event.id?.utf8.contains(0) ?? false), "event id holds NUL")
    do {
        var decodedEvents: [ChatStreamEvent] = []
        try event.withView { try decoder.decode($0, into: &decodedEvents) }
        for decoded in decodedEvents {
            switch decoded {
            case .content(let text): check(!text.isEmpty, "empty content")
            case .finish(let reason): check(!reason.isEmpty, "empty finish reason")
            case .usage: break
            case .error(let info): check(!info.message.isEmpty && info.message.count <= 1000, "error message of \(info.message.count) characters")
            case .done: check(event.type != "error", "[DONE] from an error event")
            case .toolCall: break
            case .reasoning(let text): check(!text.isEmpty, "empty reasoning")
            case .reasoningReplay: break
            }
        }
    } catch let error as ChatStreamError {
        guard case .malformedChunk(let excerpt) = error else { return }
        check(event.type == "message", "malformed chunk thrown for type \(event.type)")
        check(excerpt.count <= 200 && !excerpt.isEmpty, "excerpt of \(excerpt.count) characters")
    } catch {
        check(false, "decode threw \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = Chunking(UnsafeBufferPointer(start: start, count: count))

    var split = SSEParser(maxLineBytes: input.limit)
    let chunked = events(&split, input.chunks)
    var whole = SSEParser(maxLineBytes: input.limit)
    let single = events(&whole, [input.payload])
    check(chunked.events == single.events && chunked.failed == single.failed,
        "chunked: \(chunked.events.count) events failed=\(chunked.failed); one feed: \(single.events.count) failed=\(single.failed)")
    // Both parsers have been reset (by finish() or by the failure): they must behave as new.
    let again = events(&split, [input.payload])
    check(again.events == single.events && again.failed == single.failed, "a parser reused after finish/failure differs")

    var decoder = ChatStreamDecoder()
    for event in single.events { checkDecoded(event, &decoder) }

    let info = upstreamErrorMessage(status: 500, body: Array(input.payload))
    check(!info.message.isEmpty && info.message.count <= 1000, "upstreamErrorMessage gave \(info.message.count) characters")
    return 0
}
