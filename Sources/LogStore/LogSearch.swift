#if canImport(Glibc)
import Glibc
#endif
import CBytes
import ConfabProtocol
import Posix

/// What `conversation.search` looks for: the whole text, or failing that every word of it,
/// case-insensitively, in a stored message's content.
public struct SearchQuery: Sendable {
    public let text: String
    let lowered: String
    let words: [String]
    /// Bytes every matching line must hold once ASCII letters are folded to lower case: the
    /// longest run of the longest word that reads the same in the log's JSON (no quote, no
    /// backslash, no control character) and has no letter whose case could differ outside ASCII.
    /// Empty when the query has none; then every message line is a candidate.
    let needle: [UInt8]

    /// Nil for a query with nothing but white space.
    public init?(_ text: String) {
        let words = text.lowercased().split(whereSeparator: { $0.isWhitespace }).map(String.init)
        guard !words.isEmpty else { return nil }
        self.text = text
        // White space in the query matches a single space: "foo   bar" finds "foo bar".
        self.lowered = words.joined(separator: " ")
        self.words = words
        var best: [UInt8] = []
        for word in words {
            var run: [UInt8] = []
            for character in word {
                if Self.readsVerbatim(character) {
                    run.append(contentsOf: character.utf8)
                    if run.count > best.count { best = run }
                } else {
                    run = []
                }
            }
        }
        needle = best
    }

    private static func readsVerbatim(_ character: Character) -> Bool {
        if let ascii = character.asciiValue { return ascii >= 0x20 && ascii != 0x7F && ascii != 0x22 && ascii != 0x5C }
        let text = String(character)
        return text.lowercased() == text && text.uppercased() == text
    }

    /// Where the content matches, as a character offset into it, or nil.
    public func match(_ content: String) -> Int? {
        let haystack = content.lowercased()
        if let range = haystack.firstRange(of: lowered) { return haystack.distance(from: haystack.startIndex, to: range.lowerBound) }
        guard words.count > 1 else { return nil }
        var first: Int?
        for word in words {
            guard let range = haystack.firstRange(of: word) else { return nil }
            let offset = haystack.distance(from: haystack.startIndex, to: range.lowerBound)
            first = min(first ?? offset, offset)
        }
        return first
    }
}

public struct SearchHit: Sendable, Equatable {
    public var conversation: String
    public var message: String
    public var role: Role
    public var created: Timestamp
    public var snippet: String
}

/// Searches conversation logs as they are on disk (every record the daemon stores is written
/// there before it is announced). Runs on libuv's thread pool, never on the loop: it reads
/// whole files. Lines are found by a byte search over an ASCII-lower-cased copy of each file
/// (`memmem`, so the common case costs about one pass over the bytes), and only lines holding
/// the query's needle are parsed and matched properly.
public enum LogSearch {
    public static let snippetRadius = 40

    /// A log to search, and when it was last written: no message in it is newer than that.
    public struct Log: Sendable {
        public var id: String
        public var path: String
        public var updated: Timestamp
        public init(id: String, path: String, updated: Timestamp) {
            self.id = id
            self.path = path
            self.updated = updated
        }
    }

    /// The newest `limit` hits in `logs`. Logs are read newest first, and once `limit` hits are
    /// in hand a log last written before the oldest of them cannot hold a better one, so it is
    /// not read: a word found nearly everywhere reads a few recent logs, a word found nowhere
    /// reads them all.
    /// `isCancelled` is asked before each log: a search nobody waits for any more stops there.
    public static func search(_ logs: [Log], for query: SearchQuery, limit: Int,
                              isCancelled: () -> Bool = { false }) -> [SearchHit] {
        var hits: [SearchHit] = []
        var raw: [UInt8] = []
        var folded: [UInt8] = []
        var oldestKept: Timestamp?
        for log in logs.sorted(by: { $0.updated > $1.updated }) {
            if let oldestKept, log.updated < oldestKept { break }
            if isCancelled() { return [] }
            guard read(log.path, into: &raw) else { continue }
            fold(raw, into: &folded)
            hits.append(contentsOf: searchFile(raw: raw, folded: folded, conversation: log.id, query: query))
            if hits.count >= limit {
                keepNewest(&hits, limit)
                oldestKept = hits.last?.created
            }
        }
        keepNewest(&hits, limit)
        return hits
    }

    /// Newest first (then by conversation and message, so equal times keep one order).
    public static func keepNewest(_ hits: inout [SearchHit], _ limit: Int) {
        hits.sort {
            if $0.created != $1.created { return $0.created > $1.created }
            if $0.conversation != $1.conversation { return $0.conversation < $1.conversation }
            return $0.message.count != $1.message.count ? $0.message.count > $1.message.count : $0.message > $1.message
        }
        if hits.count > limit { hits.removeLast(hits.count - limit) }
    }

    /// The whole file in `buffer`, reused from file to file.
    private static func read(_ path: String, into buffer: inout [UInt8]) -> Bool {
        // A log grows while it is read (a reply streaming): what is past the size seen is left.
        do {
            try Files.readWhole(path: path, into: &buffer)
            return true
        } catch {
            return false
        }
    }

    /// A copy with A-Z turned into a-z and every other byte left as it is.
    static func fold(_ bytes: [UInt8], into out: inout [UInt8]) {
        if out.count != bytes.count { out = [UInt8](repeating: 0, count: bytes.count) }
        bytes.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for i in 0..<source.count {
                    let byte = source[i]
                    target[i] = byte &- 0x41 < 26 ? byte | 0x20 : byte
                }
            }
        }
    }

    static func searchFile(raw: [UInt8], folded: [UInt8], conversation: String, query: SearchQuery) -> [SearchHit] {
        // The last record of a message wins (a continued reply is written again, longer).
        var found: [String: SearchHit] = [:]
        var order: [String] = []
        func consider(_ line: ArraySlice<UInt8>) {
            guard let json = try? JSON.parse(line), let record = LogRecord(json: json) else { return }
            let message: Message
            switch record {
            case .message(let stored), .replyFinished(let stored): message = stored
            default: return
            }
            // The text first, then the names of the files it carries (the snippet is then the name's).
            var matched = query.match(message.content).map { (text: message.content, offset: $0) }
            for attachment in message.attachments ?? [] where matched == nil {
                matched = query.match(attachment.name).map { (text: attachment.name, offset: $0) }
            }
            // Then the reply's reasoning: what the model thought is found as what it said.
            if matched == nil, let thought = message.reasoning?.text {
                matched = query.match(thought).map { (text: thought, offset: $0) }
            }
            guard let matched else {
                found[message.id] = nil
                return
            }
            if found[message.id] == nil { order.append(message.id) }
            found[message.id] = SearchHit(conversation: conversation, message: message.id, role: message.role, created: message.created,
                                          snippet: snippet(of: matched.text, around: matched.offset, length: query.lowered.count))
        }
        raw.withUnsafeBufferPointer { rawBytes in
            folded.withUnsafeBufferPointer { foldedBytes in
                guard let base = foldedBytes.baseAddress, !foldedBytes.isEmpty else { return }
                var position = 0
                let count = foldedBytes.count
                while position < count {
                    let lineStart: Int, lineEnd: Int
                    if query.needle.isEmpty {
                        lineStart = position
                        lineEnd = nextNewline(base, from: position, count: count)
                    } else {
                        let hit = query.needle.withUnsafeBytes { needle in
                            cbytes_memmem(base + position, count - position, needle.baseAddress, needle.count)
                        }
                        guard let hit else { break }
                        let at = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base
                        lineStart = previousNewline(base, before: at, floor: position)
                        lineEnd = nextNewline(base, from: at, count: count)
                    }
                    consider(ArraySlice(rawBytes[lineStart..<lineEnd]))
                    position = lineEnd + 1
                }
            }
        }
        return order.compactMap { found[$0] }
    }

    private static func nextNewline(_ base: UnsafePointer<UInt8>, from position: Int, count: Int) -> Int {
        guard let newline = memchr(base + position, 0x0A, count - position) else { return count }
        return UnsafePointer<UInt8>(newline.assumingMemoryBound(to: UInt8.self)) - base
    }

    private static func previousNewline(_ base: UnsafePointer<UInt8>, before position: Int, floor: Int) -> Int {
        guard position > floor, let newline = cbytes_memrchr(base + floor, 0x0A, position - floor) else { return floor }
        return UnsafePointer<UInt8>(newline.assumingMemoryBound(to: UInt8.self)) - base + 1
    }

    /// About `snippetRadius` characters either side of the hit, on one line, with `…` where cut.
    static func snippet(of content: String, around offset: Int, length: Int) -> String {
        let characters = Array(content)
        let hit = min(max(0, offset), characters.count)
        let start = max(0, hit - snippetRadius)
        let end = min(characters.count, hit + length + snippetRadius)
        var text = ""
        var lastWasSpace = false
        for character in characters[start..<end] {
            if character.isWhitespace {
                if !lastWasSpace { text.append(" ") }
                lastWasSpace = true
            } else {
                text.append(character)
                lastWasSpace = false
            }
        }
        if start > 0 { text = "…" + text }
        if end < characters.count { text += "…" }
        return text
    }
}
