import Foundation
import Synchronization

// Anthropic's prompt cache, as its documentation describes it, for requests that carry
// `cache_control` breakpoints: a request is its blocks in the order the API renders them (each
// tool, the system prompt's blocks, each message's content blocks); a breakpoint caches the
// prefix up to and including its block for five minutes from its last use; at each breakpoint
// the server looks for the longest prefix it has cached, ending at the breakpoint or at most 20
// blocks before it. What it finds is billed as cache reads, the rest up to the last breakpoint
// as cache writes, and what follows the last breakpoint as plain input. A block's identity is
// its content, not its breakpoint, so a prefix marked in one request is read by the next that
// repeats it with its breakpoint moved on. Tokens are the fake's usual words. The real server's
// minimum cacheable prefix (1,024 tokens and more, by model) is not modelled: any prefix caches.

struct PromptCacheUsage: Equatable {
    var read = 0
    var written = 0
    var uncached = 0
}

final class PromptCache: Sendable {
    static let lifetimeSeconds = 300.0
    static let lookbackBlocks = 20

    /// A prefix's identity → when it expires (monotonic seconds).
    private let entries = Mutex<[Int: Double]>([:])

    /// One block as the cache sees it: what identifies it and its tokens.
    struct Block {
        var identity: String
        var tokens: Int
        var breakpoint: Bool
    }

    /// The blocks of a Messages request body, in the order the API renders them.
    static func blocks(of body: JSON) -> [Block] {
        var blocks: [Block] = []
        func add(_ role: String, _ value: JSON) {
            let marked = value["cache_control"] != nil
            let stripped: JSON = if case .object(let members) = value { .object(members.filter { $0.0 != "cache_control" }) } else { value }
            blocks.append(Block(identity: role + ":" + canonical(stripped).encoded(), tokens: words(in: stripped), breakpoint: marked))
        }
        for tool in body["tools"]?.arrayValue ?? [] { add("tool", tool) }
        switch body["system"] {
        case .string(let text)?: add("system", .object([("type", .string("text")), ("text", .string(text))]))
        case .array(let parts)?: for part in parts { add("system", part) }
        default: break
        }
        for (position, message) in (body["messages"]?.arrayValue ?? []).enumerated() {
            // A turn's position and role are part of what each of its blocks follows.
            let role = "\(position).\(message["role"]?.stringValue ?? "")"
            switch message["content"] {
            case .string(let text)?: add(role, .object([("type", .string("text")), ("text", .string(text))]))
            case .array(let parts)?: for part in parts { add(role, part) }
            default: break
            }
        }
        return blocks
    }

    /// Keys in order, so that a turn's text sent as a string and as a text block (which the
    /// API renders alike) are one block.
    private static func canonical(_ value: JSON) -> JSON {
        switch value {
        case .object(let members): .object(members.map { ($0.0, canonical($0.1)) }.sorted { $0.0 < $1.0 })
        case .array(let items): .array(items.map(canonical))
        default: value
        }
    }

    /// Words of a block's text (a tool's name and description, a tool call's input, a result).
    private static func words(in block: JSON) -> Int {
        let text: String = switch block["type"]?.stringValue {
            case "text": block["text"]?.stringValue ?? ""
            case "tool_result": contentText(block["content"])
            case "tool_use": block["input"]?.encoded() ?? ""
            case "image": ""
            default: [block["name"]?.stringValue, block["description"]?.stringValue, block["thinking"]?.stringValue]
                .compactMap { $0 }.joined(separator: " ")
        }
        return text.split(whereSeparator: { $0.isWhitespace }).count
    }

    /// Bills a request's blocks and caches its breakpoints' prefixes; nil when it marks none.
    func bill(_ blocks: [Block], now: Double) -> PromptCacheUsage? {
        guard let last = blocks.lastIndex(where: \.breakpoint) else { return nil }
        var prefixes: [Int] = []
        var hasher = Hasher()
        for block in blocks {
            hasher.combine(block.identity)
            let prefix = hasher  // finalize() consumes its hasher: each prefix's value comes from a copy
            prefixes.append(prefix.finalize())
        }
        return entries.withLock { entries in
            entries = entries.filter { $0.value > now }
            var hit = -1
            for (position, block) in blocks.enumerated() where block.breakpoint {
                for candidate in stride(from: position, through: max(0, position - Self.lookbackBlocks), by: -1)
                    where candidate > hit && entries[prefixes[candidate]] != nil {
                    hit = candidate
                    break
                }
            }
            if hit >= 0 { entries[prefixes[hit]] = now + Self.lifetimeSeconds }
            for (position, block) in blocks.enumerated() where block.breakpoint {
                entries[prefixes[position]] = now + Self.lifetimeSeconds
            }
            let tokens = blocks.map(\.tokens)
            return PromptCacheUsage(read: tokens[..<(hit + 1)].reduce(0, +),
                                    written: tokens[(hit + 1)..<(last + 1)].reduce(0, +),
                                    uncached: tokens[(last + 1)...].reduce(0, +))
        }
    }
}
