import ConfabProtocol
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// The last page of a conversation (`conversation.history` without `before`), read from the end
/// of its log without outlining the rest: what the first page of a long conversation needs while
/// the full outline is still being built.
public struct TailPage: Equatable, Sendable {
    public var messages: [Message]
    /// Older messages exist.
    public var more: Bool
    /// The summary in force, as the full read has it.
    public var compaction: Compaction?
}

/// Reads the last page of a log from its end.
///
/// The page is the newest `limit` messages by id with each one's latest record, what replaced it
/// (`superseded` records and the rewrite rule of `Replay.outline`) and the compaction in force:
/// exactly what the full outline gives. The records at the end of the log (the window) are
/// folded by the outline's rules. What the records before the window could change is found
/// without parsing them: every message id a record names is a JSON string, so one pass over
/// their string tokens (`memchr` for quotes) gives the highest message id they name, and the
/// lines that may hold a `compaction` or `uncompaction` record. Messages of the window above that
/// id have all their records in the window, so their page is decided there; when fewer than
/// `limit` of them are above it, the window grows backwards, and past `maxWindow` (or for a
/// reply left streaming, or a header that is not this conversation's) the tail cannot decide
/// and nil says to wait for the full read.
enum LogTail {
    static func lastPage(path: String, id: String, limit: Int, firstWindow: Int = 64 << 10, maxWindow: Int = 8 << 20) -> TailPage? {
        guard limit >= 1, let fd = try? Files.open(path, O_RDONLY) else { return nil }
        defer { Files.close(fd) }
        guard let status = try? Files.status(of: fd) else { return nil }
        let size = Int(status.size)
        guard let headerEnd = headerEnd(fd, size: size, id: id) else { return nil }
        var windowStart = max(headerEnd, size - firstWindow)
        while true {
            guard let bytes = try? Files.read(fd, offset: windowStart, count: size - windowStart),
                  bytes.count == size - windowStart else { return nil }
            switch decide(fd, bytes, windowStart: windowStart, headerEnd: headerEnd, limit: limit) {
            case .page(let page): return page
            case .undecidable: return nil
            case .needsMore:
                let length = size - windowStart
                guard windowStart > headerEnd, length < maxWindow else { return nil }
                windowStart = max(headerEnd, size - min(2 * length, maxWindow))
            }
        }
    }

    /// Where the second line starts, when the first is this conversation's header.
    private static func headerEnd(_ fd: Int32, size: Int, id: String) -> Int? {
        var length = min(size, 64 << 10)
        while true {
            guard let bytes = try? Files.read(fd, offset: 0, count: length) else { return nil }
            if let newline = bytes.firstIndex(of: 0x0A) {
                let header = bytes.withUnsafeBufferPointer { Replay.record(in: UnsafeBufferPointer(rebasing: $0[..<newline])) }
                guard case .header(let parsed)? = header?.record, parsed.id == id else { return nil }
                return newline + 1
            }
            guard length < size else { return nil }
            length = min(size, 2 * length)
        }
    }

    private enum Decision {
        case page(TailPage)
        case needsMore
        case undecidable
    }

    private static func decide(_ fd: Int32, _ bytes: [UInt8], windowStart: Int, headerEnd: Int, limit: Int) -> Decision {
        bytes.withUnsafeBufferPointer { buffer -> Decision in
            // Nothing but the header (and perhaps a torn line): no messages.
            let nothing = Decision.page(TailPage(messages: [], more: false, compaction: nil))
            guard let base = buffer.baseAddress else { return windowStart == headerEnd ? nothing : .needsMore }
            // The window's first whole line, and the end of its last (a torn last line is dropped,
            // as the full read drops it).
            var first = 0
            if windowStart > headerEnd {
                guard let newline = memchr(base, 0x0A, buffer.count) else { return .needsMore }
                first = UnsafePointer<UInt8>(newline.assumingMemoryBound(to: UInt8.self)) - base + 1
            }
            guard let lastNewline = buffer.lastIndex(of: 0x0A), lastNewline >= first else {
                return windowStart == headerEnd ? nothing : .needsMore
            }
            let end = lastNewline + 1

            // The window folded as `Replay.outline` folds it.
            var stored: [StoredMessage] = []
            var index: [String: Int] = [:]
            var unfinished: Set<String> = []
            var compaction: Compaction?? = nil
            var start = first
            while start < end {
                let newline = UnsafePointer<UInt8>(memchr(base + start, 0x0A, end - start)!.assumingMemoryBound(to: UInt8.self)) - base
                let line = UnsafeBufferPointer(rebasing: buffer[start..<newline])
                defer { start = newline + 1 }
                guard let (record, at) = Replay.record(in: line) else { continue }
                func upsert(_ message: Message) {
                    guard let order = MessageID.order(of: message.id) else { return }
                    if let position = index[message.id] {
                        stored[position] = StoredMessage(id: message.id, order: order, role: message.role, status: message.status,
                                                         supersededBy: message.supersededBy ?? stored[position].supersededBy,
                                                         offset: windowStart + start, length: newline - start)
                    } else {
                        index[message.id] = stored.count
                        stored.append(StoredMessage(id: message.id, order: order, role: message.role, status: message.status,
                                                    supersededBy: message.supersededBy, offset: windowStart + start, length: newline - start))
                    }
                }
                switch record {
                case .message(let message): upsert(message)
                case .replyStarted(let message):
                    upsert(message)
                    unfinished.insert(message.id)
                case .replyFinished(let message):
                    upsert(message)
                    unfinished.remove(message.id)
                case .superseded(let id, let by):
                    if let position = index[id] { stored[position].supersededBy = by }
                case .compaction(var found):
                    found.created = found.created ?? at
                    compaction = .some(found)
                case .uncompaction: compaction = .some(nil)
                case .header, .replyText, .replyReasoning, .title, .settings, .shared, .unshared: continue
                }
            }
            // A reply left streaming is finished by the full read (`Replay.fold`), from its texts.
            guard unfinished.isEmpty else { return .undecidable }

            // What the records before the window name.
            let before: PrefixMentions
            if windowStart + first == headerEnd {
                before = PrefixMentions()
            } else {
                guard let scanned = scanPrefix(fd, offset: headerEnd, count: windowStart + first - headerEnd) else { return .undecidable }
                before = scanned
            }
            let above = stored.filter { entry in before.highest.map { entry.order > $0 } ?? true }.sorted { $0.order < $1.order }
            if above.count < limit, before.highest != nil { return .needsMore }
            // Exactly `limit` above, none below in the window: whether older ones exist is
            // known only once one of them is in the window.
            if above.count == limit, before.highest != nil, stored.count == above.count { return .needsMore }
            let page = Array(above.suffix(limit))
            var messages: [Message] = []
            messages.reserveCapacity(page.count)
            for entry in page {
                let from = entry.offset - windowStart
                let line = UnsafeBufferPointer(rebasing: buffer[from..<(from + entry.length)])
                guard let message = Replay.message(in: line, as: entry) else { return .undecidable }
                messages.append(message)
            }
            if compaction == nil {
                guard let fromPrefix = prefixCompaction(fd, before.compactionLines, offset: headerEnd) else { return .undecidable }
                compaction = .some(fromPrefix)
            }
            return .page(TailPage(messages: messages, more: stored.count > limit, compaction: compaction!))
        }
    }

    struct PrefixMentions: Equatable {
        /// The highest message id any string token names.
        var highest: MessageOrder?
        /// The byte ranges (from the prefix's start) of lines holding a string token
        /// `compaction` or `uncompaction`, in order.
        var compactionLines: [Range<Int>] = []
    }

    /// What the `count` bytes of whole lines from `offset` name (`scanPrefix(_:)`), read a
    /// megabyte of whole lines at a time into one buffer: the prefix of a long log is tens of
    /// megabytes, and reading it in one piece made a fresh allocation of its size (a page fault
    /// for every 4 KiB) for bytes looked at once. No token spans lines, so scanning line-aligned
    /// pieces finds what scanning the whole finds. Nil when the file cannot be read.
    static func scanPrefix(_ fd: Int32, offset: Int, count: Int, piece: Int = 1 << 20) -> PrefixMentions? {
        var mentions = PrefixMentions()
        var buffer = [UInt8](repeating: 0, count: max(1, min(piece, count)))
        var done = 0
        while done < count {
            let want = min(buffer.count, count - done)
            var usable = 0
            var found: PrefixMentions?
            var unreadable = false
            buffer.withUnsafeMutableBufferPointer { all in
                let piece = UnsafeMutableBufferPointer(rebasing: all[..<want])
                guard let read = try? Files.read(fd, offset: offset + done, into: piece), read == want else {
                    unreadable = true
                    return
                }
                usable = want
                if done + want < count {
                    // Up to the last whole line; a line longer than the buffer grows it.
                    guard let newline = piece.lastIndex(of: 0x0A) else { return }
                    usable = newline + 1
                }
                found = scanPrefix(UnsafeBufferPointer(rebasing: all[..<usable]))
            }
            if unreadable { return nil }
            guard let found else {
                buffer = [UInt8](repeating: 0, count: 2 * buffer.count)
                continue
            }
            if let highest = found.highest, mentions.highest.map({ highest > $0 }) ?? true { mentions.highest = highest }
            mentions.compactionLines += found.compactionLines.map { (done + $0.lowerBound)..<(done + $0.upperBound) }
            done += usable
        }
        return mentions
    }

    /// Every string token of the bytes that could be a message id or a compaction record's type:
    /// those whose first byte is `m`, `c`, `u` or an escape (the first byte of the text is the
    /// first byte of the token otherwise). A quote counts when an even number of backslashes
    /// comes before it; a token is read up to its closing quote within 200 bytes (an id, or either
    /// type, escaped in full, is shorter), decoded by the JSON parser when it holds an escape.
    /// Over-counting (a quote that closes a string in a line the full read cannot parse) only
    /// makes the tail decide less.
    static func scanPrefix(_ buffer: UnsafeBufferPointer<UInt8>) -> PrefixMentions? {
        guard let base = buffer.baseAddress else { return PrefixMentions() }
        let count = buffer.count
        let quote: UInt8 = 0x22, backslash: UInt8 = 0x5C, newline: UInt8 = 0x0A
        let compactionType = Array("compaction".utf8), uncompactionType = Array("uncompaction".utf8)
        var mentions = PrefixMentions()
        var position = 0
        var lastLine = -1
        while position < count {
            guard let hit = memchr(base + position, Int32(quote), count - position) else { break }
            let at = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base
            position = at + 1
            guard at + 1 < count else { break }
            let next = base[at + 1]
            guard next == UInt8(ascii: "m") || next == UInt8(ascii: "c") || next == UInt8(ascii: "u") || next == backslash else { continue }
            var slashes = 0
            while at - slashes - 1 >= 0, base[at - slashes - 1] == backslash { slashes += 1 }
            guard slashes % 2 == 0 else { continue }
            // Its closing quote, on the same line, within 200 bytes.
            var close = -1
            var k = at + 1
            let limit = min(count, at + 202)
            var escaped = false
            while k < limit {
                let byte = base[k]
                if byte == newline { break }
                if byte == backslash {
                    escaped = true
                    k += 2
                    continue
                }
                if byte == quote {
                    close = k
                    break
                }
                k += 1
            }
            guard close > at else { continue }
            position = close + 1
            // Looked at where it lies: a token that is none of these ("message", "content",
            // "user", …) costs no allocation; only one with an escape is decoded.
            let decoded: [UInt8]?
            if escaped {
                guard case .string(let text)? = try? JSON.parse(UnsafeBufferPointer(rebasing: buffer[at...close])) else { continue }
                decoded = Array(text.utf8)
            } else {
                decoded = nil
            }
            let raw = UnsafeBufferPointer(rebasing: buffer[(at + 1)..<close])
            let isID: Bool, isCompaction: Bool
            if let decoded {
                isID = decoded.first == UInt8(ascii: "m")
                isCompaction = decoded == compactionType || decoded == uncompactionType
            } else {
                isID = raw.first == UInt8(ascii: "m")
                isCompaction = raw.elementsEqual(compactionType) || raw.elementsEqual(uncompactionType)
            }
            if isID {
                let order = decoded.map { MessageID.order(utf8: $0) } ?? MessageID.order(utf8: raw)
                if let order, mentions.highest.map({ order > $0 }) ?? true { mentions.highest = order }
            } else if isCompaction {
                var lineStart = at
                while lineStart > 0, base[lineStart - 1] != newline { lineStart -= 1 }
                guard lineStart != lastLine else { continue }
                lastLine = lineStart
                let lineEnd = memchr(base + at, Int32(newline), count - at)
                    .map { UnsafePointer<UInt8>($0.assumingMemoryBound(to: UInt8.self)) - base } ?? count
                mentions.compactionLines.append(lineStart..<lineEnd)
            }
        }
        return mentions
    }

    /// The compaction in force after the prefix's lines that may hold one (`.some(nil)`: none);
    /// nil when they cannot be read.
    private static func prefixCompaction(_ fd: Int32, _ lines: [Range<Int>], offset: Int) -> Compaction?? {
        var latest: Compaction?
        for range in lines {
            guard let bytes = try? Files.read(fd, offset: offset + range.lowerBound, count: range.count), bytes.count == range.count else { return nil }
            switch bytes.withUnsafeBufferPointer({ Replay.record(in: $0) }) {
            case (.compaction(var found), let at)?:
                found.created = found.created ?? at
                latest = found
            case (.uncompaction, _)?: latest = nil
            default: continue
            }
        }
        return .some(latest)
    }
}

extension Replay {
    /// One line as the outline reads it: a message record straight from its bytes, anything else
    /// parsed; nil for a line the outline skips as unreadable.
    static func record(in line: UnsafeBufferPointer<UInt8>) -> (record: LogRecord, at: Timestamp?)? {
        if let head = MessageRecordHead.read(line) { return (head.record, head.at) }
        guard let json = try? JSON.parse(line), let parsed = LogRecord(json: json) else { return nil }
        return (parsed, json["at"]?.string.flatMap(Timestamp.init(rfc3339:)))
    }
}

extension LogStore {
    /// The last `limit` messages of a log, read from its end on the thread pool (`LogTail`);
    /// nil when its end cannot decide them, and the full read must.
    public func readTail(_ log: ConversationLog, limit: Int, done: @escaping (TailPage?) -> Void) {
        let id = log.id, path = log.path
        loop.queueWork({ LogTail.lastPage(path: path, id: id, limit: limit) }, done: done)
    }
}
