// libFuzzer harness for the bytes a client sends to confabd: LineFramer -> RPC.parse ->
// Params, plus JSON.parse / JSON.write. Compiled together with Sources/ConfabProtocol/*.swift
// (same module, so no import of ConfabProtocol) by scripts/fuzz.sh:
//
//   swiftc -O -sanitize=fuzzer,address -parse-as-library -swift-version 6 \
//       Sources/ConfabProtocol/*.swift fuzz/FuzzInput.swift fuzz/ProtocolFuzz.swift -o .build-fuzz/protocol-fuzz
//
// Input layout (see fuzz/README.md): byte 0 is a header, the next `header & 7` bytes are
// chunk sizes (cycled; 0 means an empty feed), the rest is the byte stream. With no size
// bytes (or only zeros) the stream is fed one byte at a time. Header bit 7 selects a 64-byte line limit
// instead of 4096, so the line-too-long path is reached cheaply.
//
// Invariants checked (a violation is a crash, which libFuzzer saves):
//  - the framer never buffers more than its limit, never delivers a line longer than it,
//    never delivers a line holding LF, and stays failed after lineTooLong;
//  - feeding the stream in chunks delivers the same lines and the same failure as one feed;
//  - for every line that parses as JSON x: JSON.parse(x.write()) == x, and writing is stable;
//  - RPC.parse agrees with RPC.classify(JSON.parse(line));
//  - a frame classified as request / notification / response / error response, re-encoded
//    with RPC.request / .notification / .response, parses back to the same classification;
//  - Params accessors either throw RPCError -32602 or return what the member holds, and
//    optionalInt stays within its range.

/// Keys always tried (present or not), on top of the keys the params actually hold.
let keys = ["conversation", "limit"]

/// Feeds `chunks` to a fresh framer; returns the lines delivered and whether it failed.
func frame(_ chunks: [ArraySlice<UInt8>], limit: Int) -> (lines: [[UInt8]], failed: Bool) {
    var framer = LineFramer(maxLineBytes: limit)
    var lines: [[UInt8]] = []
    for chunk in chunks {
        do {
            try framer.feed(Array(chunk)) { line in
                check(line.count <= limit, "line of \(line.count) bytes > limit \(limit)")
                check(!line.contains(0x0A), "line holds LF")
                lines.append(Array(line))
            }
        } catch {
            check(error == .lineTooLong(limit: limit), "wrong failure \(error)")
            check(framer.bufferedByteCount <= limit, "buffers \(framer.bufferedByteCount) after failure")
            var again = false
            do { try framer.feed([0x41, 0x0A]) { _ in check(false, "line delivered after failure") } } catch { again = true }
            check(again, "framer accepted bytes after lineTooLong")
            return (lines, true)
        }
        check(framer.bufferedByteCount <= limit, "buffers \(framer.bufferedByteCount) > limit \(limit)")
    }
    return (lines, false)
}

func checkJSONRoundTrip(_ value: JSON) {
    let written = value.bytes
    let reparsed: JSON
    do {
        reparsed = try JSON.parse(written)
    } catch {
        fatalError("invariant violated: written JSON does not parse (\(error)): \(String(decoding: written.prefix(300), as: UTF8.self))")
    }
    check(reparsed == value, "parse(write(x)) != x for \(String(decoding: written.prefix(300), as: UTF8.self))")
    check(reparsed.bytes == written, "write is not stable")
}

/// Strips the LF that RPC's encoders end a frame with.
func body(_ frame: [UInt8]) -> ArraySlice<UInt8> {
    check(frame.last == 0x0A, "encoded frame does not end in LF")
    check(frame.dropLast().firstIndex(of: 0x0A) == nil, "encoded frame holds an inner LF")
    return frame.dropLast()
}

func checkParams(_ params: JSON?) {
    let decoded: Params
    do {
        decoded = try Params(params)
    } catch {
        check(error.code == RPCError.invalidParams, "Params threw code \(error.code)")
        return
    }
    for key in keys + decoded.members.keys.prefix(8) {
        let member = decoded.members[key]
        do {
            let value = try decoded.string(key)
            check(member == .string(value), "string(\(key)) returned something else")
        } catch {
            check(error.code == RPCError.invalidParams && !error.message.isEmpty, "string(\(key)) threw \(error)")
            check(member?.string == nil, "string(\(key)) threw on a string")
        }
        do {
            let value = try decoded.optionalString(key)
            check(value == member?.string, "optionalString(\(key)) returned something else")
        } catch {
            check(error.code == RPCError.invalidParams, "optionalString(\(key)) threw \(error)")
        }
        for range in [1...10_000, Int.min...Int.max] {
            do {
                if let value = try decoded.optionalInt(key, in: range) {
                    check(range.contains(value), "optionalInt(\(key)) out of range")
                    check(member?.int == value, "optionalInt(\(key)) returned something else")
                } else {
                    check(member == nil || member == .null, "optionalInt(\(key)) nil for a value")
                }
            } catch {
                check(error.code == RPCError.invalidParams, "optionalInt(\(key)) threw \(error)")
            }
        }
    }
}

func checkLine(_ line: [UInt8]) {
    let parsed = try? JSON.parse(line)
    if let parsed { checkJSONRoundTrip(parsed) }

    let result = RPC.parse(line)
    if let parsed {
        check(result == RPC.classify(parsed), "RPC.parse disagrees with RPC.classify")
    } else if case .failure(let failure) = result {
        check(failure.error.code == RPCError.parseError && failure.id == .null, "unparsable line gave \(failure)")
    } else {
        check(false, "RPC.parse accepted a line JSON.parse refused")
    }

    switch result {
    case .success(let frame):
        let again: [UInt8]
        switch frame {
        case .request(let id, let method, let params):
            check(id == .null || id.string != nil || id.int != nil, "request id of bad type")
            again = RPC.request(id: id, method: method, params: params)
            checkParams(params)
        case .notification(let method, let params):
            checkParams(params)
            guard let params else { return }  // RPC.notification always writes params
            again = RPC.notification(method: method, params: params)
        case .response(let id, let result):
            again = RPC.response(id: id, result: result)
        case .errorResponse(let id, let error):
            again = RPC.response(id: id, error: error)
        }
        let reparsed = RPC.parse(body(again))
        check(reparsed == .success(frame), "re-encoded \(frame) parses as \(reparsed)")
    case .failure(let failure):
        check(failure.error.code < 0 && !failure.error.message.isEmpty, "failure without code or message")
        let answer = RPC.response(id: failure.id, error: failure.error)
        check(RPC.parse(body(answer)) == .success(.errorResponse(id: failure.id, error: failure.error)),
            "the error answer does not parse back")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = Chunking(UnsafeBufferPointer(start: start, count: count))
    let split = frame(input.chunks, limit: input.limit)
    let whole = frame([input.payload], limit: input.limit)
    check(split.lines == whole.lines && split.failed == whole.failed,
        "chunked feed gave \(split.lines.count) lines failed=\(split.failed), one feed \(whole.lines.count) failed=\(whole.failed)")
    for line in split.lines { checkLine(line) }
    return 0
}
