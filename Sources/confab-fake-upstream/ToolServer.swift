import Foundation
import Glibc

// The other end of a tool call: HTTP endpoints under `…/tool/` that play the tools a model
// asks for, on the same listener as the model API. See docs/fake-upstream.md, "Tool endpoints".

/// What follows `/tool/` in a request's path (`echo`, `status/404`, …), or nil if the path
/// has no `/tool/` in it.
func toolRoute(_ path: String) -> String? {
    guard let range = path.range(of: "/tool/") else { return nil }
    return String(path[range.upperBound...])
}

/// Most that `/tool/big` writes: 100 MiB.
let maxToolBigBytes = 100 * 1024 * 1024

/// Answers a request to a `…/tool/…` path. Returns true if the connection may serve another request.
func serveTool(_ request: Request, route: String, body: JSON?, connection: Connection, keepAlive: Bool) -> Bool {
    let query = queryItems(request.target)
    func number(_ name: String) -> Int? {
        query.last(where: { $0.name == name }).flatMap { Int(String(decoding: $0.value, as: UTF8.self)) }
    }
    if route.hasPrefix("status/") {
        guard let status = Int(route.dropFirst(7)), (200...599).contains(status) else {
            return sendJSON(connection, status: 400, body: #"{"error":"status must be 200 to 599"}"#, keepAlive: keepAlive)
        }
        if status == 204 || status == 304 {  // no body allowed
            let head = responseHead(status: status, headers: [("Connection", keepAlive ? "keep-alive" : "close")])
            return connection.send(head) && keepAlive
        }
        let error = JSON.object([("error", .string("status \(status)"))])
        return sendJSON(connection, status: status, body: error.encoded(), keepAlive: keepAlive)
    }
    if route == "hang" {
        // Never answers: the client gives up first, or the process ends at --max-lifetime.
        connection.waitForClientToGoAway(maxSeconds: .infinity)
        return false
    }
    if route == "big" {
        return sendBig(count: min(max(number("bytes") ?? 1_048_576, 0), maxToolBigBytes),
                       chunked: number("chunked") == 1, connection: connection, keepAlive: keepAlive)
    }
    if route == "text" {
        let text = query.last(where: { $0.name == "body" })?.value ?? []
        let head = responseHead(status: 200, headers: [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", String(text.count)),
            ("Connection", keepAlive ? "keep-alive" : "close"),
        ])
        return connection.send(Array(head.utf8) + text) && keepAlive
    }
    if route == "slow" {
        sleepMilliseconds(min(max(number("ms") ?? 0, 0), 600_000))
    }
    // echo…, slow and any other path: what the request was.
    var members: [(String, JSON)] = [
        ("method", .string(request.method)),
        ("path", .string(request.path)),
        ("query", .string(request.target.firstIndex(of: "?").map { String(request.target[request.target.index(after: $0)...]) } ?? "")),
        ("body", body ?? .null),
    ]
    if body == nil && !request.body.isEmpty {
        members.append(("raw_body", .string(String(decoding: request.body, as: UTF8.self))))
    }
    members.append(("headers", loggedHeaders(request.headers)))
    // `escape=slash`: every `/` as `\/`, as many JSON writers send it; `escape=unicode`: every
    // character but letters and digits inside strings as `\u00XX`. Both are the same JSON.
    let escape = query.last(where: { $0.name == "escape" }).map { String(decoding: $0.value, as: UTF8.self) }
    var answer = JSON.object(members).encoded()
    switch escape {
    case "slash": answer = answer.replacingOccurrences(of: "/", with: "\\/")
    case "unicode": answer = escapingEveryPunctuationInStrings(answer)
    default: break
    }
    return sendJSON(connection, status: 200, body: answer, keepAlive: keepAlive)
}

/// Compact JSON text with every ASCII character inside a string that is not a letter, a digit
/// or part of an escape written as `\u00XX`.
private func escapingEveryPunctuationInStrings(_ json: String) -> String {
    var out = ""
    var inString = false
    var escaped = false
    for scalar in json.unicodeScalars {
        if !inString {
            if scalar == "\"" { inString = true }
            out.unicodeScalars.append(scalar)
        } else if escaped {
            escaped = false
            out.unicodeScalars.append(scalar)
        } else if scalar == "\\" {
            escaped = true
            out.unicodeScalars.append(scalar)
        } else if scalar == "\"" {
            inString = false
            out.unicodeScalars.append(scalar)
        } else if scalar.isASCII, !scalar.properties.isAlphabetic, !("0"..."9").contains(scalar) {
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// `count` bytes of `x`, in 64 KiB writes, with a Content-Length or (`chunked`) as HTTP chunks.
/// A client that goes away ends it quietly.
private func sendBig(count: Int, chunked: Bool, connection: Connection, keepAlive: Bool) -> Bool {
    let head = responseHead(status: 200, headers: [
        ("Content-Type", "text/plain"),
        chunked ? ("Transfer-Encoding", "chunked") : ("Content-Length", String(count)),
        ("Connection", keepAlive ? "keep-alive" : "close"),
    ])
    guard connection.send(head) else { return false }
    let block = [UInt8](repeating: UInt8(ascii: "x"), count: 65_536)
    var left = count
    while left > 0 {
        let size = min(left, block.count)
        let piece = size == block.count ? block : Array(block[0..<size])
        guard chunked ? connection.send(Array((String(size, radix: 16) + "\r\n").utf8) + piece + [0x0D, 0x0A])
                      : connection.send(piece)
        else { return false }
        left -= size
    }
    if chunked { guard connection.send("0\r\n\r\n") else { return false } }
    return keepAlive
}

/// The query string's `name=value` pairs, both percent-decoded to bytes (`+` stays `+`; a `%`
/// not followed by two hex digits stays as it is), so a value may carry any byte at all.
func queryItems(_ target: String) -> [(name: String, value: [UInt8])] {
    guard let mark = target.firstIndex(of: "?") else { return [] }
    var query = target[target.index(after: mark)...]
    if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
    return query.split(separator: "&").map { item in
        let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(decoding: percentDecoded(parts[0]), as: UTF8.self)
        return (name, parts.count > 1 ? percentDecoded(parts[1]) : [])
    }
}

func percentDecoded(_ text: Substring) -> [UInt8] {
    let bytes = Array(text.utf8)
    func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
    var out: [UInt8] = []
    var i = 0
    while i < bytes.count {
        if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) {
            out.append(high << 4 | low)
            i += 3
        } else {
            out.append(bytes[i])
            i += 1
        }
    }
    return out
}
